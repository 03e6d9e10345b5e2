"""How the CLI shows a build: one progress bar over the plan, download bars, a bar per package landed, and the
engine's log as text.

The engine (py-rattler-build) reports through a ``ProgressCallback``; this one renders on the CLI's stderr
console. Log lines are printed as plain text: build output is full of ``[...]`` that rich would read as markup.
Every URL in what is shown goes through :func:`._urls.shown_text`: a channel's password, token or signature
never reaches the console, whoever logs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from ._urls import shown_text, shown_url

_STYLES = {"error": "bold red", "warn": "yellow"}
# The engine's own bookkeeping that says nothing to a person watching a build.
_QUIET_SPANS = ("index_subdir", "get_or_create_subdir")


class _DownloadStart(Protocol):
    url: str
    total_bytes: int | None


class _DownloadProgress(Protocol):
    url: str
    bytes_downloaded: int


class _Url(Protocol):
    url: str


class _Step(Protocol):
    step_name: str
    message: str


class _Log(Protocol):
    level: str
    message: str
    span: str | None


def new_progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


class EngineEvents:
    """A py-rattler-build ``ProgressCallback`` drawing into ``progress`` and printing the log on ``console``."""

    def __init__(self, progress: Progress, console: Console) -> None:
        self._progress = progress
        self._console = console
        self._downloads: dict[str, TaskID] = {}

    def on_download_start(self, event: _DownloadStart) -> None:
        self._downloads[event.url] = self._progress.add_task(
            f"downloading {shown_url(event.url)}", total=event.total_bytes
        )

    def on_download_progress(self, event: _DownloadProgress) -> None:
        task = self._downloads.get(event.url)
        if task is not None:
            self._progress.update(task, completed=event.bytes_downloaded)

    def on_download_complete(self, event: _Url) -> None:
        task = self._downloads.pop(event.url, None)
        if task is not None:
            self._progress.remove_task(task)
        self._console.print(Text(f"downloaded {shown_url(event.url)}"))

    def on_build_step(self, event: _Step) -> None:
        self._console.print(Text(shown_text(f"── {event.step_name}: {event.message}"), style="bold"))

    def on_log(self, event: _Log) -> None:
        span = event.span or ""
        if event.level == "info" and any(quiet in span for quiet in _QUIET_SPANS):
            return
        self._console.print(
            Text(shown_text(event.message), style=_STYLES.get(event.level, "")), soft_wrap=True
        )


_LANDING_STAGES = {"read": "landing {name}: reading, rewriting", "written": "landing {name}: compressing"}


def landing_bars(progress: Progress) -> Callable[[Path], Callable[[str, int, int], None]]:
    """The display of each package's landing (builder/landing/one_pass.py): a bar in MiB, through its two stages (its
    file read and its members rewritten, then its payload compressed), left as ``landed NAME`` when done."""

    def for_package(package: Path) -> Callable[[str, int, int], None]:
        task = progress.add_task(f"landing {package.name}", total=None)

        def update(stage: str, done: int, total: int) -> None:
            finished = stage == "written" and done >= total
            description = f"landed {package.name}" if finished else _LANDING_STAGES[stage]
            progress.update(
                task,
                completed=done >> 20,
                total=max(total >> 20, 1),
                description=description.format(name=package.name),
            )

        return update

    return for_package


class ConsoleHandler(logging.Handler):
    """Log records as plain lines on a rich console, so they print above a live progress bar."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self._console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            style = "yellow" if record.levelno >= logging.WARNING else ""
            self._console.print(Text(shown_text(self.format(record)), style=style), soft_wrap=True)
        except Exception:  # noqa: BLE001 - logging's contract: report through handleError, never raise
            self.handleError(record)
