"""The doctor's records: a check's result, and the system it looks at (live, or a fake ``--root``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from .bounded import RefusedFile, read_bounded

Status = Literal["ok", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = get_args(Status)

Group = Literal["cpu", "environment", "toolchain", "glibc", "runtime"]


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """One row of the report: ``fix`` is the one-line remedy (``None`` when there is nothing to do)."""

    id: str
    status: Status
    message: str
    fix: str | None = None


@dataclass(frozen=True, kw_only=True)
class System:
    """Where the doctor reads from.

    ``root`` is ``/`` on the live system; with ``--root`` it is a recorded tree and ``live`` is false, so
    nothing is probed in-process (no ``getauxval``, no library loading) and every file comes from the tree.
    """

    root: Path
    live: bool
    env: Mapping[str, str]

    @classmethod
    def from_root(cls, root: Path | None, env: Mapping[str, str] | None = None) -> System:
        return cls(root=root or Path("/"), live=root is None, env=os.environ if env is None else env)

    def path(self, absolute: str | Path) -> Path:
        """``absolute`` (a path on the inspected system) as a path on this machine."""
        return self.root / str(absolute).lstrip("/")

    def read_text(self, absolute: str | Path) -> str | None:
        """The stripped text of a file on the inspected system, or ``None`` when it cannot be read.

        Only a regular file is read (the files of ``/proc`` and ``/sys`` are regular files too). A FIFO, a
        socket or a device where a file belongs (a ``--root`` tree copied with its special files, a symlink to
        ``/dev/zero``) cannot be read, as a file without read permission cannot: the checks that need it judge
        without it or skip, and none of them waits for a writer that never comes or reads without end. It is
        opened without blocking, so a FIFO is seen for what it is before anything is read, and read up to
        :data:`.bounded.MAX_FILE` bytes: a longer file (a sparse one of gigabytes) cannot be read either.
        """
        try:
            return read_bounded(self.path(absolute)).decode("utf-8", errors="replace").strip()
        except (OSError, RefusedFile):
            return None

    def which(self, name: str) -> Path | None:
        """``name`` looked up on the inspected system's ``PATH`` (an absolute name is taken as is)."""
        if "/" in name:
            candidate = self.path(name)
            return Path(name) if _is_executable(candidate) else None
        for folder in self.env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep):
            if folder and _is_executable(self.path(folder) / name):
                return Path(folder) / name
        return None

    def glob(self, pattern: str) -> list[Path]:
        """Paths on the inspected system matching an absolute glob ``pattern``, sorted."""
        return sorted(Path("/") / p.relative_to(self.root) for p in self.root.glob(pattern.lstrip("/")))


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@dataclass(frozen=True, kw_only=True)
class Check:
    """A named diagnostic: ``run`` turns the facts into one result and never needs to catch."""

    id: str
    group: Group
    summary: str
    run: Callable[[Facts], CheckResult]
    # Off aarch64 the package cannot run at all: only a check that says so helps; the others are skipped.
    off_aarch64: bool = False


class Facts:
    """What the checks share, computed once and only when a selected check asks for it."""

    def __init__(self, system: System) -> None:
        self.system = system
        self._cache: dict[str, object] = {}

    def memo(self, key: str, compute: Callable[[], object]) -> object:
        """The value of ``compute()``, computed on first use; an exception is re-raised on every use."""
        if key not in self._cache:
            try:
                self._cache[key] = compute()
            except Exception as exc:  # noqa: BLE001 - every dependent check reports it as its failure
                self._cache[key] = exc
        value = self._cache[key]
        if isinstance(value, Exception):
            raise value
        return value
