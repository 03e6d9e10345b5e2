"""The errors flagtree-doctor and flagtree-verify report: a message, a one-line fix and an exit status.

The CLIs catch :class:`DoctorError` only at their boundary and print one line,
``flagtree-doctor: error: <message> (fix: <fix>)`` (or, under ``--json``, one JSON object carrying it).
"""

from __future__ import annotations


class ActionableError(Exception):
    """A message, a one-line fix and the exit status of the command that reports it.

    The root of this distribution's errors, and of the build toolkit's (``flagtree_feedstock.errors``).
    """

    return_code: int = 1

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} (fix: {self.fix})" if self.fix else self.message


class DoctorError(ActionableError):
    """Root of the diagnostics' errors."""


class ConfigurationError(DoctorError):
    """Bad input: an option, a check or op name, a ``--root`` tree, an environment variable's value."""

    return_code = 2


class NotInstalledError(DoctorError):
    """What is to be verified (FlagTree, torch) is not installed in this Python."""

    return_code = 2


class EnvironmentNotActiveError(DoctorError):
    """``--apply`` needs an active conda environment to write into."""

    return_code = 2


class EnvironmentWriteError(DoctorError):
    """``--apply`` (or ``--undo``) cannot write into the environment's activation folders (read-only, not ours)."""

    return_code = 2
