"""The main job: run the planned builds (:mod:`.plan`) with py-rattler-build, publish a channel.

Planning is pure (:func:`.plan.plan_builds`), so which outputs are built (the LLVM output once for the whole
python matrix) is tested without building anything. Execution (:func:`run_plan`) builds what the channel
folder lacks, one engine call at a time in a process of its own, and publishes each finished package into
the channel folder at once.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from flagtree_feedstock._own_files import PATCH, read_own, repository_of
from flagtree_feedstock._urls import shown_text, shown_url
from flagtree_feedstock.channel.credentials import AUTH_VARIABLE, split_credentials, with_own_credentials
from flagtree_feedstock.channel.index_relay import serving, timeouts_within
from flagtree_feedstock.channel.link_scripts import NONE_ALLOWED, LinkScriptPolicy
from flagtree_feedstock.errors import (
    BuildFailedError,
    DependencyError,
    FeedstockError,
    SourceFetchError,
)
from flagtree_feedstock.platforms import PlatformName
from flagtree_feedstock.recipe.render import RenderedOutput

from ._worker import EngineCall, run_engine
from .landing.one_pass import ENGINE_FORMATS, Progress
from .options import PackageFormat
from .output_dir import OutputFolder
from .package_tests import run_tests
from .plan import BuildStep
from .step_copies import (
    build_channels,
    installs_packages,
    missing_copy,
    presolve_channels,
    repacked_channel,
    step_channel,
)

LOGGER = logging.getLogger(__name__)
# Lines of a build log that report the cause of a failure: compilers, linkers, CMake, Python.
_ERROR_LINE = re.compile(r"\berror:|\bcannot find\b|CMake Error|undefined reference|Traceback \(most recent")


@dataclass(frozen=True, kw_only=True)
class RecipeSource:
    """What the plan was rendered from: the engine's worker renders the same recipe again to build a step."""

    recipe: Path
    variant_files: tuple[Path, ...]
    target_platform: PlatformName
    build_platform: PlatformName | None = None


@dataclass(frozen=True, kw_only=True)
class ForeignTarget(RecipeSource):
    """A target platform that is not this machine's, and what the engine needs to build for it.

    py-rattler-build 0.73's ``RenderedVariant.run_build`` solves the host environment for this machine's
    platform whatever the target (its host platform defaults to the current one and the rendered variant
    does not carry it), so a linux-64 -> linux-aarch64 build cannot find a single linux-aarch64 host
    package. The engine's command-line entry, ``build_recipes``, takes the platforms explicitly and gets
    it right; for such targets each step goes through it, rendering the same variant (same build string).
    """

    build_platform: PlatformName


@dataclass(frozen=True, kw_only=True)
class BuildSettings:
    """How to execute a plan."""

    channel_dir: Path
    channels: tuple[str, ...]
    test: bool
    keep_build: bool = False
    # Rebuild the planned packages the channel folder already holds (replacing them) instead of reusing them.
    force: bool = False
    # A cross build whose package tests can run under an emulator (CROSSCOMPILING_EMULATOR, qemu-user).
    emulated: bool = False
    # What the plan was rendered from, for a native build (a foreign one carries it in ``foreign``).
    source: RecipeSource | None = None
    # Set when the target platform is not this machine's (a cross build).
    foreign: ForeignTarget | None = None
    package_format: PackageFormat = "conda"
    # The packages whose link scripts may run as the engine installs them (--allow-link-scripts).
    link_scripts: LinkScriptPolicy = NONE_ALLOWED
    # The longest one request of the relay to a channel may take, whole (--channel-timeout; None: its default).
    channel_timeout: float | None = None

    @property
    def test_strategy(self) -> str:
        """The engine's test strategy: ``native`` skips a cross build's tests, unless they can be emulated."""
        if not self.test:
            return "skip"
        return "native-and-emulated" if self.emulated else "native"


StepCallback = Callable[[int, int, BuildStep], None]


def run_plan(
    plan: Sequence[BuildStep],
    settings: BuildSettings,
    *,
    on_step: StepCallback | None = None,
    engine_events: object | None = None,
    on_landing: Callable[[Path], Progress | None] | None = None,
) -> list[Path]:
    """Build every step the channel folder lacks; each finished package is published and indexed at once.

    Under the output folder's lock: the folder is indexed (its packages checked whole), a planned package it
    already holds (same file name, so the same variant hash) is reused unless ``settings.force``, and the
    rest are built one engine call at a time (:mod:`._worker`) into a staging folder that links the
    channel's packages, so later steps solve against earlier ones (``pin_subpackage``). After every call,
    whatever it finished lands in the channel folder (:meth:`.output_dir.OutputFolder.land`), so a later failure
    or a Ctrl-C keeps it. ``engine_events`` is a py-rattler-build ``ProgressCallback`` (downloads, build
    steps, the build log), ``on_landing(package)`` a package's landing display. Returns the packages
    published.
    """
    source = settings.foreign or settings.source
    if source is None:
        raise ValueError("BuildSettings needs the recipe source (source= or foreign=)")
    channel_dir = settings.channel_dir
    subdirs = (source.target_platform, "noarch")
    published: list[Path] = []
    # The channels' credentials, and your RATTLER_AUTH_FILE's for their hosts: the relay's alone, never the engine's.
    engine = with_own_credentials(split_credentials(settings.channels), os.environ)
    folder = OutputFolder(channel_dir, subdirs)
    with folder.opened() as lock:
        todo = folder.lacking(plan, force=settings.force)
        if not todo:
            return published
        cache, cache_of_copies = folder.caches(rebuilt=[step.stem for step in todo])
        # Beside the output folder, as the copies' cache is: a copy is linked into a step's channel, not copied.
        copies_place, copies_prefix = folder.scratch_place("copies")
        leave_out = {step.stem for step in todo} if settings.force else set()
        with (
            folder.staging(keep_on_failure=settings.keep_build, leave_out=leave_out) as staging,
            tempfile.TemporaryDirectory(prefix=copies_prefix, dir=copies_place) as scratch,
            # The user's channels, for the solves before the builds and tests: served on loopback by the toolkit,
            # which fetches every byte of them with its own client and their credentials (index_relay.py).
            serving(
                engine.channels,
                authorize=engine.authorize,
                scratch=_made(Path(scratch) / "relay"),
                timeouts=timeouts_within(settings.channel_timeout),
                copies=cache_of_copies,  # the relay serves the engine the toolkit's copies only
            ) as relay,
        ):
            # No engine call reads a remote channel or gets credentials, not even the user's own file: the build
            # call reads the step's copies and the staging folder, the solve before it the relay.
            env = {
                **{k: v for k, v in os.environ.items() if k != AUTH_VARIABLE},
                "RATTLER_CACHE_DIR": str(cache),
            }
            presolve_env = {**env, **_direct_to_loopback(env)}
            given = [staging.as_uri(), *settings.channels]  # as the user gave them: for messages, shown
            for index, step in enumerate(todo):
                if on_step is not None:
                    on_step(index, len(todo), step)
                LOGGER.debug("building %s", step.describe())
                # The toolkit's copies of what the engine would install (step_copies.py), else no build.
                copies = step_channel(Path(scratch), index)
                call = _engine_call(
                    step,
                    settings,
                    source,
                    staging=staging,
                    channels=build_channels(copies, staging),
                    events=engine_events,
                )
                if installs_packages(step.output):
                    repacked_channel(
                        replace(call, channels=presolve_channels(staging, relay)),
                        copies,
                        cache=cache_of_copies,
                        env=presolve_env,
                        lock=lock,
                        relay=relay,
                        link_scripts=settings.link_scripts,
                        name=step.describe(),
                        given=given,
                    )
                result = run_engine(call, events=engine_events, env=env, lock=lock)
                # No build-machine paths, an SBOM, no engine clock or folders in what lands (builder/landing/).
                landed = folder.land(
                    staging,
                    channels=call.channels,
                    recipe_dir=source.recipe.parent,
                    variant_files=source.variant_files,
                    progress=on_landing,
                )
                # The tests of what it finished, against the toolkit's copies only (package_tests.py).
                failure = run_tests(
                    landed if result.outcome == "ok" and settings.test else [],
                    {s.stem: s.output for s in plan},
                    call,
                    strategy=settings.test_strategy,
                    scratch=Path(scratch),
                    staging=staging,
                    relay=relay,
                    cache=cache_of_copies,
                    link_scripts=settings.link_scripts,
                    env=env,
                    lock=lock,
                    events=engine_events,
                )
                # A cross step can finish several packages (outputs it pins that were missing) before it fails.
                published += folder.publish(staging, force=settings.force)
                if failure is not None:
                    raise failure
                if result.outcome == "crash":
                    raise BuildFailedError(
                        f"building {step.describe()} failed: {shown_text(result.text, given)}",
                        fix="read the output above; rerun with --keep-build to keep its work folder",
                    )
                if result.outcome == "error":
                    missing = missing_copy(step.describe(), step.output, result.text, given, copies=copies)
                    if missing is not None:
                        raise missing
                    if call.mode == "recipe":
                        _log_script_tail(staging)
                    raise classify_build_error(step, result.text, given, staging=staging)
    return published


def _made(folder: Path) -> Path:
    """``folder``, made (its parent exists)."""
    folder.mkdir()
    return folder


def _direct_to_loopback(env: Mapping[str, str]) -> dict[str, str]:
    """``no_proxy``/``NO_PROXY`` of ``env`` with ``127.0.0.1`` added: the engine reaches the relay directly, never
    through an ``http_proxy`` of the environment."""
    given = [h for h in (env.get("no_proxy") or env.get("NO_PROXY") or "").split(",") if h.strip()]
    hosts = ",".join([*given, "127.0.0.1"] if "127.0.0.1" not in given else given)
    return {"no_proxy": hosts, "NO_PROXY": hosts}


def _engine_call(
    step: BuildStep,
    settings: BuildSettings,
    source: RecipeSource,
    *,
    staging: Path,
    channels: tuple[str, ...],
    events: object | None,
) -> EngineCall:
    """The worker's call for ``step``: its rendered variant, or for a foreign target ``build_recipes``.

    ``up_to`` stops at this output (outputs it pins that the staging folder lacks are built first, as the
    engine orders them); the python override keeps to this step's variant. That entry reports no progress
    events, so after a failure the tail of the failed script's log is logged here.
    """
    common = {
        "recipe": str(source.recipe),
        "variant_files": tuple(str(f) for f in source.variant_files),
        "target_platform": source.target_platform,
        "build_platform": source.build_platform,
        "output_dir": str(staging),
        "channels": channels,
        "test_strategy": "skip",  # each package is tested in a call of its own (package_tests.py)
        "keep_build": settings.keep_build,
        # The engine's fastest level: the landing compresses once, at the final level (landing/one_pass.py).
        "package_format": ENGINE_FORMATS[settings.package_format],
        "events": events is not None,
    }
    if settings.foreign is None:
        return EngineCall(mode="variant", key=step.output.key, **common)  # type: ignore[arg-type]
    return EngineCall(
        mode="recipe",
        up_to=step.output.name,
        python=step.output.variant.get("python"),
        **common,  # type: ignore[arg-type]
    )


def _log_script_tail(staging: Path, lines: int = 40, errors: int = 5) -> None:
    """Log the end of the newest build script log under ``staging`` (the engine keeps a failed work dir).

    The first error lines before that end are logged too: a compiler's or linker's message is often
    followed by more than ``lines`` lines of pip's or CMake's own report.
    """
    logs = sorted(staging.glob("bld/*/work/conda_build.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return
    text = logs[-1].read_text(errors="replace").splitlines()
    head, tail = text[:-lines], text[-lines:]
    first = [line.strip() for line in head if _ERROR_LINE.search(line)][:errors]
    if first:
        LOGGER.error("the first errors in %s:\n%s", logs[-1], "\n".join(first))
    LOGGER.error("the end of %s:\n%s", logs[-1], "\n".join(tail))


def classify_build_error(
    step: BuildStep, text: str, channels: Sequence[str], *, staging: Path | None = None
) -> BuildFailedError | SourceFetchError | DependencyError:
    """Turn the engine's message into one line that names the cause and the fix.

    ``staging`` is the engine's output folder, where it keeps a failed build's work folder. The channels'
    secrets (a password, a token, a signature) are shown nowhere in it (:func:`.._urls.shown_text`).
    """
    reason = text.strip().splitlines()[0] if text.strip() else "no message"
    reason = shown_text(reason.removeprefix("PyRattlerBuildError: "), channels)
    name = step.describe()
    if "download" in reason.lower() or "fetch" in reason.lower():
        urls = ", ".join(_source_urls(step.output)) or "its sources"
        return SourceFetchError(
            f"a source of {name} could not be fetched ({reason}): {urls}",
            fix="build where these URLs are reachable, or check the url and sha256 in the recipe",
        )
    if reason.startswith("Patch application error"):
        patch = _failed_patch(step.output, text)
        return BuildFailedError(
            f"a patch of {name} does not apply ({patch or 'which one: see the hunk above'}): {reason}",
            fix="refresh the patch against the pinned upstream commit (patches/README.md says how)",
        )
    if reason.startswith("No license files were copied"):
        missing = _missing_licences(step.output, staging)
        return BuildFailedError(
            f"building {name} failed: {reason}"
            + (f"; not in the work folder after the build script: {', '.join(missing)}" if missing else ""),
            fix="the build script must leave every about.license_file in place (copy it, do not move it)",
        )
    if "resolve dependencies" in reason.lower() or "solve" in reason.lower():
        return DependencyError(
            f"the build/host requirements of {name} could not be solved from "
            f"{', '.join(shown_url(c) for c in channels[1:]) or 'no channel'}",
            fix="pass --channel with a reachable channel that has them (conda-forge needs network access)",
        )
    return BuildFailedError(
        f"building {name} failed: {reason}",
        fix="read the build log above; rerun with --keep-build to keep its work folder",
    )


def _missing_licences(output: RenderedOutput, staging: Path | None) -> list[str]:
    """The output's license_file entries that match nothing in the newest work folder under ``staging``."""
    works = sorted(staging.glob("bld/*/work"), key=lambda p: p.stat().st_mtime) if staging else []
    if not works:
        return []
    files = output.engine_variant.recipe.to_dict().get("about", {}).get("license_file") or []
    return [str(f) for f in ([files] if isinstance(files, str) else files) if not any(works[-1].glob(str(f)))]


def _failed_patch(output: RenderedOutput, text: str) -> str | None:
    """The recipe's patch file that holds the hunk the engine could not apply (its message shows the hunk)."""
    _, _, hunk = text.partition("Hunk content:")
    # The hunk's lines as the engine prints them (its header spaced differently): each must be in the patch.
    body = [line for line in hunk.splitlines()[2:] if line.strip()]
    if not body:
        return None
    recipe_dir = Path(str(output.engine_variant.recipe_path)).parent
    for source in output.engine_variant.recipe.sources:
        for patch in source.to_dict().get("patches") or ():
            try:
                data = read_own(recipe_dir / str(patch), PATCH, inside=repository_of(recipe_dir)).data
            except FeedstockError:  # checked before the build: gone or changed since, it holds no hunk
                continue
            lines = set(data.decode("utf-8", "replace").splitlines())
            if all(line in lines for line in body):
                return str(patch)
    return None


def _source_urls(output: RenderedOutput) -> list[str]:
    urls: list[str] = []
    for source in output.engine_variant.recipe.sources:
        entry = source.to_dict()
        found = entry.get("url") or entry.get("git")
        if isinstance(found, list):
            urls.extend(str(u) for u in found)
        elif found:
            urls.append(str(found))
    return urls
