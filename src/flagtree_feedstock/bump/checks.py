"""The checks of ``flagtree-feedstock bump``: does the feedstock still fit the new FlagTree (and flagtree-cpu)?

Each check returns one :class:`Check` row: ``ok``, ``refresh`` (passes once the refreshed patches are
written), ``skip`` (nothing to check, and why) or ``fail`` (with the details of the first failure). A check
that meets a file it cannot read fails with that reason rather than stopping the others.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from flagtree_feedstock._own_files import RECIPE, RECIPE_FILE, read_own_text, repository_of
from flagtree_feedstock.recipe import variants

from . import cmake_scan, cpu_api
from ._git import GitTree
from .patching import PatchOutcome, apply_series, recipe_series

CheckStatus = Literal["ok", "refresh", "skip", "fail"]


@dataclass(frozen=True, kw_only=True)
class Check:
    """One row of the bump's table."""

    name: str
    status: CheckStatus
    summary: str
    details: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Upstream:
    """What the checks read: FlagTree at the new commit (and at the pin, when the clone has it), flagtree-cpu
    when given, the feedstock's recipe folder, and a scratch folder for exported files."""

    flagtree: GitTree
    pinned: GitTree | None
    flagtree_cpu: GitTree | None
    flagtree_cpu_commit: str
    recipe_dir: Path
    scratch: Path
    exported: dict[str, Path] = field(default_factory=dict, compare=False)

    def cmake_tree(self, which: Literal["flagtree", "flagtree-cpu"]) -> Path:
        """The CMake files of FlagTree (all the cpu build reads) or flagtree-cpu (its linked folders)."""
        if which not in self.exported:
            dest = self.scratch / which
            if which == "flagtree":
                paths = [
                    p for p in self.flagtree.files() if cmake_scan.is_cmake_file(p) and cmake_scan.is_built(p)
                ]
                self.flagtree.export(paths, dest)
            else:
                assert self.flagtree_cpu is not None
                folders = (*cmake_scan.FLAGTREE_CPU_DIRS, "include/triton/Dialect/TritonCPU")
                self.flagtree_cpu.export(
                    [p for p in self.flagtree_cpu.files(folders) if cmake_scan.is_cmake_file(p)], dest
                )
            dest.mkdir(parents=True, exist_ok=True)
            self.exported[which] = dest
        return self.exported[which]

    def pin_name(self) -> str:
        return self.pinned.commit[:8] if self.pinned else "the pin"


def short(commit: str) -> str:
    return commit[:8]


def run_checks(upstream: Upstream) -> tuple[list[Check], list[PatchOutcome]]:
    """Every check against ``upstream``, and the outcome of every patch (refreshed texts included)."""
    outcomes: list[PatchOutcome] = []
    checks: list[Check] = []
    series = recipe_series(upstream.recipe_dir / "recipe.yaml")
    for name in ("flagtree", "flagtree-cpu"):
        check, series_outcomes = _patches(name, series[name], upstream)
        checks.append(check)
        outcomes += series_outcomes
    for name, step in _CHECKS.items():
        checks.append(_guarded(name, step, upstream))
    return checks, outcomes


def _guarded(name: str, step: Callable[[Upstream], Check], upstream: Upstream) -> Check:
    try:
        return step(upstream)
    except (cmake_scan.ScanError, SyntaxError, UnicodeDecodeError) as exc:
        return Check(name=name, status="fail", summary=f"cannot read upstream's files: {exc}")


def _count(number: int) -> str:
    """``1 patch``, ``9 patches``: the subject of the patch checks' summaries."""
    return f"{number} patch" if number == 1 else f"{number} patches"


def _patches(name: str, patches: list[Path], upstream: Upstream) -> tuple[Check, list[PatchOutcome]]:
    check = f"patches-{name}"
    tree = upstream.flagtree if name == "flagtree" else upstream.flagtree_cpu
    if not patches:
        return Check(name=check, status="skip", summary=f"the recipe lists no patches for {name}"), []
    if tree is None:
        return Check(
            name=check, status="skip", summary=f"{_count(len(patches))} not checked: no --flagtree-cpu-src"
        ), []
    missing = [
        patch for patch in patches if not os.path.lexists(patch)
    ]  # another kind: the reader refuses it
    if missing:
        return Check(
            name=check, status="fail", summary=f"recipe.yaml lists {missing[0]}, which does not exist"
        ), []
    outcomes = apply_series(
        patches, tree, scratch=upstream.scratch, inside=repository_of(upstream.recipe_dir)
    )
    failed = next((o for o in outcomes if o.failure is not None), None)
    if failed is not None and failed.failure is not None:
        untried = sum(o.status == "not tried" for o in outcomes)
        summary = f"{failed.patch.name}: {failed.failure.describe()}"
        if untried:
            summary += f"; {untried} later {'patch' if untried == 1 else 'patches'} not tried"
        return Check(name=check, status="fail", summary=summary, details=(failed.failure.text,)), outcomes
    refreshed = [o for o in outcomes if o.refreshed is not None]
    if refreshed:
        names = ", ".join(o.patch.name for o in refreshed)
        return Check(
            name=check,
            status="refresh",
            summary=f"{_count(len(outcomes))} applied; {len(refreshed)} at an offset, refreshed: {names}",
            details=tuple(offset for o in refreshed for offset in o.offsets),
        ), outcomes
    return Check(
        name=check,
        status="ok",
        summary=f"{_count(len(outcomes))} applied in recipe order with GNU patch -F0, no offset",
    ), outcomes


def _llvm_distribution(recipe_dir: Path) -> list[str]:
    """``flagtree_links()`` of the recipe's llvm_distribution.py (the script build-llvm.sh runs), run from the
    text the one reader read (an import would read the file again, by name)."""
    path = recipe_dir / "llvm_distribution.py"
    source = read_own_text(path, RECIPE_FILE, inside=repository_of(recipe_dir))
    module = types.ModuleType("_bump_llvm_distribution")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - the recipe's own code
    links: list[str] = module.flagtree_links()
    return links


def _llvm_libraries(upstream: Upstream) -> Check:
    name = "llvm-libraries"
    if upstream.flagtree_cpu is not None:
        cpu: Path | dict[str, frozenset[str]] = upstream.cmake_tree("flagtree-cpu")
        source = f"flagtree-cpu {short(upstream.flagtree_cpu.commit)}'s CMake"
    else:
        record = cmake_scan.FLAGTREE_CPU_RECORDS.get(upstream.flagtree_cpu_commit)
        if record is None:
            return Check(
                name=name,
                status="fail",
                summary=f"no record of what flagtree-cpu {short(upstream.flagtree_cpu_commit)} links",
                details=("pass --flagtree-cpu-src (a clone of flagtree-cpu) to read its CMake",),
            )
        cpu, source = record, f"the record of flagtree-cpu {short(upstream.flagtree_cpu_commit)}"
    expected = cmake_scan.expected_llvm_links(upstream.cmake_tree("flagtree"), cpu)
    listed = _llvm_distribution(upstream.recipe_dir)
    problems = cmake_scan.llvm_list_problems(listed, expected)
    if problems:
        return Check(name=name, status="fail", summary=problems[0], details=tuple(problems[1:]))
    return Check(
        name=name,
        status="ok",
        summary=f"llvm_distribution.py lists the {len(listed)} LLVM/MLIR libraries FlagTree's CMake and {source} link",
    )


def recipe_host(recipe: Path, output: str = "flagtree-cpu") -> tuple[set[str], bool]:
    """The host requirement names of ``output`` in recipe.yaml, and whether its build has ``stdlib('c')``."""
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    data = yaml.safe_load(read_own_text(recipe, RECIPE, inside=repository_of(recipe.parent)))
    for entry in data.get("outputs", []):
        if entry.get("package", {}).get("name") == output:
            requirements = entry.get("requirements", {})
            build = list(variants.requirement_strings(requirements.get("build")))
            host = set(variants.requirement_names(requirements.get("host")))
            return host, any("stdlib('c')" in s or 'stdlib("c")' in s for s in build)
    return set(), False


def _plain_libraries(upstream: Upstream) -> Check:
    name = "plain-libraries"
    roots = [upstream.cmake_tree("flagtree")]
    if upstream.flagtree_cpu is not None:
        roots.append(upstream.cmake_tree("flagtree-cpu"))
    linked = cmake_scan.plain_libraries(roots)
    host, sysroot = recipe_host(upstream.recipe_dir / "recipe.yaml")
    problems = cmake_scan.unprovided(linked, host, sysroot=sysroot)
    if problems:
        return Check(name=name, status="fail", summary=problems[0], details=tuple(problems[1:]))
    provided = ", ".join(f"-l{lib} ({cmake_scan.PROVIDERS[lib].split(' (')[0]})" for lib in sorted(linked))
    return Check(
        name=name, status="ok", summary=f"every plain library FlagTree links is provided: {provided}"
    )


def _link_script(upstream: Upstream) -> Check:
    name = "link-script"
    script = upstream.flagtree.read_text(cpu_api.LINK_SCRIPT)
    links = cpu_api.links(script or "")
    if not links:
        return Check(name=name, status="fail", summary=f"{cpu_api.LINK_SCRIPT} has no SYMLINKS list any more")
    link_paths = {link.path for link in links}
    missing = []
    for link in links:
        inside = link.in_flagtree_cpu
        if inside is None:
            resolved = link.resolved
            under_link = any(resolved == p or resolved.startswith(f"{p}/") for p in link_paths)
            if upstream.flagtree.entry(resolved) is None and not under_link:
                missing.append(f"{link.path} -> {resolved} (not in FlagTree)")
        elif upstream.flagtree_cpu is not None and upstream.flagtree_cpu.entry(inside) is None:
            missing.append(
                f"{link.path} -> {inside} (not in flagtree-cpu {short(upstream.flagtree_cpu.commit)})"
            )
    if missing:
        subject = "1 link target does not" if len(missing) == 1 else f"{len(missing)} link targets do not"
        return Check(name=name, status="fail", summary=f"{subject} exist: {missing[0]}",
                     details=tuple(missing[1:]))  # fmt: skip
    if upstream.flagtree_cpu is not None:
        return Check(
            name=name,
            status="ok",
            summary=f"the {len(links)} links' targets exist in flagtree-cpu {short(upstream.flagtree_cpu.commit)} "
            "and FlagTree",
        )
    if upstream.pinned is None:
        return Check(
            name=name,
            status="fail",
            summary="the pinned FlagTree commit is not in --flagtree-src, so the links cannot be compared",
            details=("fetch the branch's history (git fetch --unshallow), or pass --flagtree-cpu-src",),
        )
    before = cpu_api.links(upstream.pinned.read_text(cpu_api.LINK_SCRIPT) or "")
    if before != links:
        added = [f"+ {link.path}|{link.target}" for link in links if link not in before]
        removed = [f"- {link.path}|{link.target}" for link in before if link not in links]
        return Check(
            name=name,
            status="fail",
            summary=f"the links changed since {upstream.pin_name()}; pass --flagtree-cpu-src to check their targets",
            details=(*removed, *added),
        )
    return Check(
        name=name,
        status="ok",
        summary=f"the {len(links)} links are those of {upstream.pin_name()}, whose targets the pinned flagtree-cpu has",
    )


def _flagtree_api(tree: GitTree) -> tuple[dict[str, cpu_api.BuilderMethod], str | None]:
    methods = cpu_api.builder_methods(tree.read_text(cpu_api.TLE_ARM64) or "")
    return methods, cpu_api.builtin_keyword(tree.read_text(cpu_api.CORE) or "")


def _unchanged_since_pin(name: str, upstream: Upstream, what: str, changed: list[str]) -> Check:
    """Without flagtree-cpu: FlagTree's side must be what it was at the pin, which the pinned flagtree-cpu fit."""
    if upstream.pinned is None:
        return Check(
            name=name,
            status="fail",
            summary=f"the pinned FlagTree commit is not in --flagtree-src, so {what} cannot be compared",
            details=("fetch the branch's history (git fetch --unshallow), or pass --flagtree-cpu-src",),
        )
    if changed:
        return Check(
            name=name,
            status="fail",
            summary=f"{what} changed since {upstream.pin_name()}; pass --flagtree-cpu-src to check flagtree-cpu "
            "against it",
            details=tuple(changed),
        )
    return Check(
        name=name,
        status="ok",
        summary=f"{what} as at {upstream.pin_name()} (flagtree-cpu {short(upstream.flagtree_cpu_commit)} fits it; "
        "no --flagtree-cpu-src)",
    )


def _builtin_keyword(upstream: Upstream) -> Check:
    name = "builtin-keyword"
    _, keyword = _flagtree_api(upstream.flagtree)
    if keyword is None:
        return Check(
            name=name,
            status="fail",
            summary=f"{cpu_api.CORE}: builtin() checks neither _builder nor _semantic",
        )
    cpu = upstream.flagtree_cpu
    if cpu is None:
        before = _flagtree_api(upstream.pinned)[1] if upstream.pinned else None
        changed = [] if before == keyword else [f"builtins took {before}, now {keyword}"]
        return _unchanged_since_pin(name, upstream, f"FlagTree's builtins take {keyword}", changed)
    source = cpu.read_text(cpu_api.TLE_OPS)
    if source is None:
        return Check(name=name, status="fail", summary=f"flagtree-cpu has no {cpu_api.TLE_OPS}")
    builtins = cpu_api.builtin_parameters(source)
    wrong = [
        f"{fn} takes {', '.join(sorted(k)) or 'neither'}" for fn, k in builtins.items() if k != {keyword}
    ]
    if wrong:
        return Check(
            name=name,
            status="fail",
            summary=f"FlagTree's builtins take {keyword}; in tle_ops.py {wrong[0]}",
            details=tuple(wrong[1:]),
        )
    return Check(
        name=name,
        status="ok",
        summary=f"FlagTree and the {len(builtins)} builtins of tle_ops.py use {keyword}",
    )


def _builder_methods(upstream: Upstream) -> Check:
    name = "builder-methods"
    methods, _ = _flagtree_api(upstream.flagtree)
    if not methods:
        return Check(name=name, status="fail", summary=f"{cpu_api.TLE_ARM64} defines no create_cpu_* method")
    cpu = upstream.flagtree_cpu
    if cpu is None:
        before = _flagtree_api(upstream.pinned)[0] if upstream.pinned else {}
        changed = [
            f"{n}: {_arity(before.get(n))} -> {_arity(methods.get(n))}"
            for n in sorted(set(before) | set(methods))
            if before.get(n) != methods.get(n)
        ]
        return _unchanged_since_pin(
            name, upstream, f"tle_arm64's {len(methods)} create_cpu_* methods", changed
        )
    source = cpu.read_text(cpu_api.TLE_OPS)
    if source is None:
        return Check(name=name, status="fail", summary=f"flagtree-cpu has no {cpu_api.TLE_OPS}")
    known = cpu_api.defined_methods(upstream.flagtree.read_text(cpu_api.IR_BINDINGS) or "") | set(methods)
    problems = []
    for call in cpu_api.builder_calls(source):
        method = methods.get(call.method)
        if call.method.startswith("create_cpu_") and method is None:
            problems.append(f"tle_ops.py:{call.line} calls {call.method}, which tle_arm64 does not define")
        elif method is not None and method.arguments != call.arguments:
            problems.append(
                f"tle_ops.py:{call.line} calls {call.method} with {call.arguments} arguments; "
                f"tle_arm64 takes {method.arguments}"
            )
        elif call.method not in known:
            problems.append(f"tle_ops.py:{call.line} calls {call.method}, which FlagTree's builder lacks")
    if problems:
        return Check(name=name, status="fail", summary=problems[0], details=tuple(problems[1:]))
    called = {c.method for c in cpu_api.builder_calls(source)} & set(methods)
    return Check(
        name=name,
        status="ok",
        summary=f"tle_ops.py calls {len(called)} of tle_arm64's {len(methods)} create_cpu_* methods with "
        "their argument counts; its other builder calls are in python/src/ir.cc",
    )


def _arity(method: cpu_api.BuilderMethod | None) -> str:
    return "absent" if method is None else f"{method.arguments} arguments, creates {method.op}"


def _ops(upstream: Upstream) -> Check:
    name = "tritoncpu-ops"
    methods, _ = _flagtree_api(upstream.flagtree)
    cpu = upstream.flagtree_cpu
    if cpu is None:
        return Check(
            name=name,
            status="skip",
            summary="no --flagtree-cpu-src (the ops tle_arm64 creates are compared as builder-methods)",
        )
    td = cpu.read_text(cpu_api.OPS_TD)
    if td is None:
        return Check(name=name, status="fail", summary=f"flagtree-cpu has no {cpu_api.OPS_TD}")
    ops = cpu_api.dialect_ops(td)
    problems = []
    for method in methods.values():
        if method.op is None:
            continue
        if method.op not in ops:
            problems.append(f"{method.name} creates cpu::{method.op}, which TritonCPUOps.td does not define")
        elif ops[method.op] != method.arguments:
            problems.append(
                f"cpu::{method.op} takes {ops[method.op]} arguments in TritonCPUOps.td; "
                f"{method.name} passes {method.arguments}"
            )
    if problems:
        return Check(name=name, status="fail", summary=problems[0], details=tuple(problems[1:]))
    created = {m.op for m in methods.values() if m.op}
    return Check(
        name=name,
        status="ok",
        summary=f"TritonCPUOps.td defines the {len(created)} ops tle_arm64 creates, with as many arguments",
    )


# The checks after the patches, by name, in the table's order.
_CHECKS: dict[str, Callable[[Upstream], Check]] = {
    "llvm-libraries": _llvm_libraries,
    "plain-libraries": _plain_libraries,
    "link-script": _link_script,
    "builtin-keyword": _builtin_keyword,
    "builder-methods": _builder_methods,
    "tritoncpu-ops": _ops,
}
