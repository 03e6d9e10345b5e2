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
    """Bad input: a variant file, an option, a recipe path."""

    return_code = 2


class NothingToDoError(FeedstockError):
    """Every variant was skipped for the target platform."""

    return_code = 3


class ToolMissingError(FeedstockError):
    """An external tool or optional Python dependency is not installed."""

    return_code = 4


class PlatformError(FeedstockError):
    """This host cannot build for the requested target platform."""

    return_code = 5


class SourceFetchError(FeedstockError):
    """A recipe source could not be downloaded or checked."""

    return_code = 6


class DependencyError(FeedstockError):
    """The build or host environment could not be solved from the channels."""

    return_code = 7


class BuildFailedError(FeedstockError):
    """The build script or a package test failed."""

    return_code = 8


class ChannelError(FeedstockError):
    """A channel folder could not be indexed, solved from or installed from."""

    return_code = 9


class FolderBusyError(FeedstockError):
    """Processes of an earlier build, whose command was killed, still run for the output folder."""

    return_code = 12


class FileAccessError(FeedstockError):
    """A file or folder could not be read or written: a permission, a path too long, a full disk."""

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
