"""A conda package file read whole, bounded, and checked before anything indexes, installs or uploads it.

The file is read by the archive layer's one reader (:func:`flagtree_feedstock._archive.open_package`: both
formats, a ``.conda``'s zip in order as rattler reads it, every tar bounded by :data:`LIMITS`, one reading
only). Then the package is checked as the installer will use it:

- ``info/`` holds files only: a link there (symbolic or hard) is refused, since the installer would read
  the metadata through it where this check would not;
- every member and every ``info/paths.json`` entry (and ``info/files`` and ``info/has_prefix`` line) is a
  relative path without ``..``; an entry names a file or link the package holds (the installer links each from the unpacked package
  into the prefix); no member lies below a symlink of the package (the installer would write through it);
- every symlink's target, resolved through the package's own symlinks from the link's folder, stays inside
  the prefix (it may name a file of another package: ``libblas.so.3 -> libopenblas.so.0``), and is never
  absolute; so no path of the package leaves the prefix;
- every noarch python entry point (``info/link.json``) is a plain file name (the installer writes
  ``bin/<name>``);
- the ``info/`` JSON files are read only up to :data:`INFO_BYTES`, nested no deeper than Python's parser goes.

py-rattler 0.28 itself resolves a ``paths.json`` entry such as ``x/../../target`` through a symlink member
``x`` and writes outside the prefix (``tests/test_package_paths.py`` keeps the smallest such package).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Collection, Iterator
from pathlib import Path

from flagtree_feedstock._archive.package import (
    INFO_BYTES,
    LIMITS,
    DamagedPackage,
    Package,
    PackageMember,
    UnsafePackage,
    open_package,
)
from flagtree_feedstock._archive.tar_stream import CHUNK, parts_of, resolve, shown

# The reader's refusals, for the callers of the check.
__all__ = ["DamagedPackage", "UnsafePackage", "load_json", "read_member", "read_package"]
PATHS = "info/paths.json"
FILES = "info/files"
HAS_PREFIX = "info/has_prefix"
LINK = "info/link.json"


_LINK_KINDS = {"symlink": "symbolic link", "hardlink": "hard link"}


def read_package(
    path: Path, wanted: Collection[str], name: str | None = None, *, whole: bool = True
) -> dict[str, bytes]:
    """The ``info/...`` members named in ``wanted`` that the package at ``path`` holds, once the whole file was
    read, bounded, and found whole and safe (the module docstring); else raise :class:`DamagedPackage` (or
    :class:`UnsafePackage`) saying why, naming the member. ``name``, the file name it has in a channel
    (``path``'s own by default), says which of the two formats it is. ``whole=False`` stops once the members
    are found, for a package already checked whole (``upload`` checks each first).

    A link is never followed inside the archive: a conda package may hold links to files of a package it
    depends on. A ``.conda`` file's zip members must pass their CRC-32, a ``.tar.bz2`` must decompress to its
    end (bzip2 checks each block's CRC and the stream's). A file that cannot be read (``OSError`` with an
    errno) is not a damaged package: that error is raised as it is.
    """
    reading = _Reading(wanted, whole=whole)
    with open_package(path, name) as package:
        reading.take(package)
    if whole:
        reading.check()
    return {key: value for key, value in reading.found.items() if key in wanted}


def load_json(member: str, content: bytes) -> object:
    """An ``info/`` JSON member, within :data:`INFO_BYTES` and the nesting Python's parser takes (its recursion
    limit, about 1000 levels; deeper is a RecursionError, refused here); else :class:`DamagedPackage`."""
    if len(content) > INFO_BYTES:
        raise UnsafePackage(
            f"its {member} has {len(content)} bytes, above the {INFO_BYTES} an info file may have"
        )
    try:
        return json.loads(content.decode())
    except UnicodeDecodeError:
        raise DamagedPackage(f"its {member} is not UTF-8") from None
    except RecursionError:
        raise UnsafePackage(f"its {member} is nested deeper than Python's JSON parser goes") from None
    except ValueError as exc:
        raise DamagedPackage(f"its {member} is not JSON: {_first_line(exc)}") from None


class _Reading:
    """What the tars of one package held: each member's kind, the symlinks, the info files read."""

    def __init__(self, wanted: Collection[str], *, whole: bool) -> None:
        self.wanted = set(wanted) | ({PATHS, FILES, HAS_PREFIX, LINK} if whole else set())
        self.whole = whole
        self.found: dict[str, bytes] = {}
        self.kinds: dict[str, str] = {}
        self.symlinks: dict[str, str] = {}

    def done(self) -> bool:
        return not self.whole and all(name in self.found for name in self.wanted)

    def take(self, package: Package) -> None:
        """Every member of ``package`` (all of them when whole: the file is read to its end, every check made
        there), the wanted info files read."""
        for member in package:
            if member.section == "info" and member.kind in _LINK_KINDS:
                raise UnsafePackage(
                    f"member {shown(member.name)} is a {_LINK_KINDS[member.kind]}: the installer would read "
                    "info/ through it; a package's info/ holds files only"
                )
            self.kinds[member.name] = member.kind
            if member.kind == "symlink":
                self.symlinks[member.name] = member.target
            elif member.kind == "file" and member.name in self.wanted:
                self.found[member.name] = read_member(package, member)
            if self.done():
                return

    def check(self) -> None:
        """The package as the installer will link it: every path and link target stays inside the prefix.

        With no ``..`` in a name (the tar reader refuses it), a path can leave the prefix only through a
        symlink: no member may lie below one of the package's symlinks, and every symlink's target, resolved
        through the others, must stay inside.
        """
        for name in self.kinds:
            parts = parts_of(name)
            for depth in range(1, len(parts)):
                if "/".join(parts[:depth]) in self.symlinks:
                    raise UnsafePackage(
                        f"member {shown(name)} lies below the package's symlink {shown('/'.join(parts[:depth]))}: "
                        "the installer would write through it"
                    )
                # A file that is a folder too: rattler's unpacking fails on it, or keeps one of the two.
                if self.kinds.get(above := "/".join(parts[:depth])) in ("file", "hardlink"):
                    raise UnsafePackage(
                        f"member {shown(name)} lies below {shown(above)}, a file of the package: readers differ "
                        "on which of the two is there"
                    )
        for name, target in self.symlinks.items():
            if target.startswith("/"):
                raise UnsafePackage(f"member {shown(name)} is a symlink to the absolute path {shown(target)}")
            if resolve([*parts_of(name)[:-1], *target.split("/")], self.symlinks, follow_last=True) is None:
                raise UnsafePackage(
                    f"member {shown(name)} is a symlink to {shown(target)}, which leads outside the prefix"
                )
        for entry, source in self._listed():
            self._check_listed(entry, source)
        self._check_entry_points()

    def _listed(self) -> Iterator[tuple[object, str]]:
        """Every path ``info/paths.json``, ``info/files`` and ``info/has_prefix`` list, with the file that lists
        it."""
        if PATHS in self.found:
            document = load_json(PATHS, self.found[PATHS])
            paths = document.get("paths") if isinstance(document, dict) else None
            if not isinstance(paths, list):
                raise DamagedPackage(f"its {PATHS} holds no list of paths")
            for entry in paths:
                yield (entry.get("_path") if isinstance(entry, dict) else None), PATHS
        yield from ((line, FILES) for line in self._lines(FILES))
        yield from ((_prefix_path(line), HAS_PREFIX) for line in self._lines(HAS_PREFIX))

    def _lines(self, member: str) -> list[str]:
        """The lines of the text file ``member`` that are not blank (none when the package has no such file)."""
        try:
            lines = self.found.get(member, b"").decode().splitlines()
        except UnicodeDecodeError:
            raise DamagedPackage(f"its {member} is not UTF-8") from None
        return [line for line in lines if line.strip()]

    def _check_listed(self, entry: object, source: str) -> None:
        if not isinstance(entry, str) or not entry:
            raise DamagedPackage(f"its {source} lists a path that is no text: {shown(repr(entry))}")
        if len(entry.encode()) > LIMITS.name_bytes:
            raise UnsafePackage(f"its {source} lists {shown(entry)}, longer than {LIMITS.name_bytes} bytes")
        if entry.startswith("/") or ".." in entry.split("/"):
            raise UnsafePackage(f"its {source} lists {shown(entry)}: not a relative path without '..'")
        # held as a member, so it lies below none of the package's symlinks (check)
        if self.kinds.get("/".join(parts_of(entry))) not in ("file", "symlink", "hardlink"):
            raise UnsafePackage(
                f"its {source} lists {shown(entry)}, which is no file or link the package holds"
            )

    def _check_entry_points(self) -> None:
        if LINK not in self.found:
            return
        document = load_json(LINK, self.found[LINK])
        noarch = document.get("noarch") if isinstance(document, dict) else None
        points = noarch.get("entry_points", []) if isinstance(noarch, dict) else []
        for point in points if isinstance(points, list) else [points]:
            command = point.split("=", 1)[0].strip() if isinstance(point, str) else ""
            if not command or "/" in command or "\\" in command or command in (".", ".."):
                raise UnsafePackage(
                    f"its {LINK} names the entry point {shown(str(point))}, not a plain file name"
                )


def _prefix_path(line: str) -> str:
    """The path of an ``info/has_prefix`` line: ``PLACEHOLDER MODE PATH`` (each may be quoted), or a path alone."""
    try:
        words = shlex.split(line)
    except ValueError:  # an unclosed quote: the line is a path, as the installer reads it
        return line
    return words[2] if len(words) == 3 and words[1] in ("text", "binary") else line


def read_member(package: Package, member: PackageMember, limit: int = INFO_BYTES) -> bytes:
    """The whole data of ``package``'s current ``member``, a file of at most ``limit`` bytes (an info file:
    :data:`INFO_BYTES`), else :class:`UnsafePackage`."""
    if member.size > limit:
        raise UnsafePackage(
            f"member {shown(member.name)} declares {member.size} bytes, above the {limit} an info file may have"
        )
    chunks = []
    while chunk := package.read(CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
