"""One commit of a local git repository, read through git's plumbing: never its work tree, never a checkout.

``flagtree-feedstock bump`` reads FlagTree (and flagtree-cpu) this way, so ``--to REF`` needs no checkout and a
dirty work tree changes nothing; what it reads is exactly what the recipe's git source fetches at that commit.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from flagtree_feedstock._foreign_text import FIELD_CHARS, bounded
from flagtree_feedstock._subprocess import which
from flagtree_feedstock.errors import ConfigurationError

EntryKind = Literal["blob", "tree", "commit"]
_GIT_HINT = "apt-get install git (or your platform's git package)"


def _run(
    repo: Path, args: Sequence[str], *, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    git = which("git", install_hint=_GIT_HINT)
    return subprocess.run(
        [git, "-C", str(repo), *args], input=stdin, capture_output=True, check=False, timeout=300
    )


@dataclass(frozen=True, kw_only=True)
class GitTree:
    """The tree of ``commit`` (a full hash) in the repository at ``repo``."""

    repo: Path
    commit: str

    @classmethod
    def open(cls, repo: Path, ref: str, *, option: str) -> GitTree:
        """``ref`` of the repository at ``repo``; ``option`` names the command-line option for the error."""
        if not repo.is_dir():
            raise ConfigurationError(
                f"{option} {repo} is not a directory", fix=f"point {option} at a git clone of the repository"
            )
        prefix = _run(repo, ["rev-parse", "--show-prefix"])
        if prefix.returncode != 0 or prefix.stdout.strip():  # not a repository, or a folder inside one
            raise ConfigurationError(
                f"{option} {repo} is not a git repository",
                fix=f"point {option} at a git clone (the bump reads commits, tags and history)",
            )
        done = _run(repo, ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
        if done.returncode != 0:
            raise ConfigurationError(
                f"{ref} is not a commit of {repo}",
                fix=f"fetch it into {repo} (git fetch origin), or name a branch, tag or commit that is there",
            )
        return cls(repo=repo, commit=done.stdout.decode().strip())

    def at(self, commit: str) -> GitTree | None:
        """The same repository at ``commit``, or None when the repository does not hold that commit."""
        done = _run(self.repo, ["rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"])
        return GitTree(repo=self.repo, commit=done.stdout.decode().strip()) if done.returncode == 0 else None

    def entry(self, path: str) -> EntryKind | None:
        """What ``path`` is at this commit: a file (blob), a folder (tree), a submodule (commit), or None."""
        done = _run(self.repo, ["ls-tree", self.commit, "--", path.rstrip("/")])
        line = done.stdout.decode().strip()
        if done.returncode != 0 or not line:
            return None
        kind = line.split()[1]
        return kind if kind in ("blob", "tree", "commit") else None  # type: ignore[return-value]

    def gitlink(self, path: str) -> str | None:
        """The commit a submodule at ``path`` is pinned to, or None when ``path`` is no submodule."""
        done = _run(self.repo, ["ls-tree", self.commit, "--", path])
        fields = done.stdout.decode().split()
        return fields[2] if len(fields) >= 3 and fields[1] == "commit" else None

    def read_bytes(self, path: str) -> bytes | None:
        """The content of the file ``path``, or None when there is no file there."""
        done = _run(self.repo, ["cat-file", "blob", f"{self.commit}:{path}"])
        return done.stdout if done.returncode == 0 else None

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8", errors="replace")

    def files(self, under: Iterable[str] = ()) -> list[str]:
        """Every file path of the commit (under the given folders, when any), as git lists them."""
        done = _run(self.repo, ["ls-tree", "-r", "-z", "--name-only", self.commit, "--", *under])
        return [name for name in done.stdout.decode().split("\0") if name]

    def export(self, paths: Iterable[str], dest: Path) -> None:
        """Write the files ``paths`` of the commit under ``dest`` (one `git cat-file --batch` for them all)."""
        wanted = list(paths)
        if not wanted:
            return
        request = "".join(f"{self.commit}:{path}\n" for path in wanted).encode()
        done = _run(self.repo, ["cat-file", "--batch"], stdin=request)
        data, position = done.stdout, 0
        for path in wanted:
            end = data.index(b"\n", position)
            header = data[position:end].split()
            position = end + 1
            if len(header) != 3 or header[1] != b"blob":  # "<path> missing"
                continue
            size = int(header[2])
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[position : position + size])
            position += size + 1

    def describe(self, match: str) -> tuple[str, int] | None:
        """The nearest tag matching the glob ``match`` that this commit descends from, and the distance."""
        done = _run(self.repo, ["describe", "--tags", "--long", "--match", match, self.commit])
        if done.returncode != 0:
            return None
        tag, distance, _ = done.stdout.decode().strip().rsplit("-", 2)
        return tag, int(distance)

    def committer_time(self) -> int:
        """The commit's committer date, in seconds since the epoch (git's ``%ct``): its header's
        ``committer NAME <EMAIL> SECONDS ZONE`` line."""
        raw = _run(self.repo, ["cat-file", "commit", self.commit]).stdout.decode("utf-8", errors="replace")
        header = raw.split("\n\n", 1)[0].splitlines()
        line = next(line for line in header if line.startswith("committer "))
        return int(line.rsplit(" ", 2)[1])

    def subject(self) -> str:
        """The commit's subject: the first paragraph of its message, on one line (as git's ``%s``), cut to
        :data:`.._foreign_text.FIELD_CHARS` (with its length said): it is shown in the report's headline."""
        raw = _run(self.repo, ["cat-file", "commit", self.commit]).stdout.decode("utf-8", errors="replace")
        message = raw.split("\n\n", 1)[1] if "\n\n" in raw else ""
        return bounded(" ".join(message.strip().split("\n\n", 1)[0].split()), FIELD_CHARS)
