"""One root for every error the toolkit reports, each with an exit code and a fix.

The CLI catches :class:`FeedstockError` only at its boundary and prints one line:
``flagtree-feedstock: error: <message> (fix: <fix>)``.
"""

from __future__ import annotations

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


class UpstreamCheckError(FeedstockError):
    """A check of ``bump`` failed: the new upstream commit needs work by hand before it can be pinned."""

    return_code = 10
