"""One root for every error the toolkit reports, each with an exit code and a fix.

The CLI catches :class:`FeedstockError` only at its boundary and prints one line:
``flagtree-feedstock: error: <message> (fix: <fix>)``.
"""

from __future__ import annotations

import errno

from flagtree_doctor.errors import ActionableError


class FeedstockError(ActionableError):
    """Root of the toolkit's errors: a message, a one-line fix and an exit code."""


class ConfigurationError(FeedstockError):
    """Bad input, wrong on any machine: an option, a variant file (its file, line and key named), a recipe, a
    path that names nothing or the wrong kind of file (a file where a folder belongs, a FIFO, an empty path)."""

    return_code = 2


class NothingToDoError(FeedstockError):
    """Nothing to build: every variant is skipped for the target platform."""

    return_code = 3


class ToolMissingError(FeedstockError):
    """An external tool or an optional Python dependency is not installed (the line names what to install)."""

    return_code = 4


class PlatformError(FeedstockError):
    """This host cannot build for the requested target platform."""

    return_code = 5


class SourceFetchError(FeedstockError):
    """A recipe source or an ``--llvm-archive`` could not be downloaded or checked."""

    return_code = 6


class DependencyError(FeedstockError):
    """What was asked for cannot be solved from the channels: a build's build or host environment, the specs
    of ``channel install``."""

    return_code = 7


class BuildFailedError(FeedstockError):
    """The build script or a package test failed."""

    return_code = 8


class ChannelError(FeedstockError):
    """A channel's content: a damaged, misnamed, linked or misplaced package, a damaged or missing index, a
    channel that cannot be reached, an upload the server refused."""

    return_code = 9


class FolderBusyError(FeedstockError):
    """Processes of an earlier build, whose command was killed, still run for the output folder (the line names
    them and gives the ``kill`` command)."""

    return_code = 12


class FileAccessError(FeedstockError):
    """The file system refused a path: a permission, a read-only mount, a name too long, a loop of links, a full
    disk (standard output too); the line names the path."""

    return_code = 10


# What to do about the file-system errors a user can meet, by errno; others get a generic fix.
_FILE_FIXES = {
    errno.EACCES: "check the permissions along that path, or choose another path",
    errno.EPERM: "check the permissions along that path, or choose another path",
    errno.EROFS: "that file system is mounted read-only: choose a path on another one",
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.ENOSPC: "free disk space there, or choose a path on another file system",
    errno.EDQUOT: "free space within your disk quota, or choose another path",
}


def file_access_error(exc: OSError) -> FileAccessError:
    """``exc`` as one line naming the path(s) it concerns and what to do."""
    paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    reason = exc.strerror or str(exc) or type(exc).__name__
    return FileAccessError(
        f"{reason}: {paths}" if paths else reason,
        fix=_FILE_FIXES.get(
            exc.errno or 0,
            "check that path" if paths else "rerun as flagtree-feedstock --debug-traceback ... to see where",
        ),
    )


class UpstreamCheckError(FeedstockError):
    """A check of ``bump`` failed: the new upstream commit needs work by hand before it can be pinned."""

    return_code = 11


def exit_status_table() -> str:
    """docs/building.md's table of exit statuses, one row per class above (tests/test_exit_statuses.py keeps
    the doc equal to it): each status has one meaning, in every command."""
    classes = sorted(_subclasses(FeedstockError), key=lambda c: c.return_code)
    rows = ["| exit | class | meaning |", "| --- | --- | --- |"]
    for cls in classes:
        meaning = " ".join((cls.__doc__ or "").split()).replace("``", "`")
        rows.append(f"| {cls.return_code} | `{cls.__name__}` | {meaning} |")
    return "\n".join(rows)


def _subclasses(root: type[FeedstockError]) -> list[type[FeedstockError]]:
    found = []
    for cls in root.__subclasses__():
        if "return_code" in vars(cls) and cls.__module__ == __name__:
            found.append(cls)
        found.extend(_subclasses(cls))
    return found
