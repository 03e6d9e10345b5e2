"""Run external commands the same way everywhere: check the executable, echo ``+ cmd``, map failures."""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import BuildFailedError, ToolMissingError

LOGGER = logging.getLogger(__name__)


def which(executable: str, *, install_hint: str) -> str:
    """The full path of ``executable`` or a :class:`ToolMissingError` saying how to install it."""
    found = shutil.which(executable)
    if found is None:
        raise ToolMissingError(f"{executable} is not on PATH", fix=install_hint)
    return found


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
    """Run ``argv`` with inherited stdout/stderr; a non-zero exit becomes a :class:`BuildFailedError`."""
    LOGGER.info("+ %s", shlex.join(argv))
    completed = subprocess.run(list(argv), env=None if env is None else dict(env), cwd=cwd, check=False)
    if completed.returncode != 0:
        raise BuildFailedError(
            f"{Path(argv[0]).name} exited with status {completed.returncode}",
            fix="read its output above; the command is echoed after '+'",
        )
