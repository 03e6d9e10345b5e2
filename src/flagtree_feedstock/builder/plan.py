"""Which packages a build makes: the outputs asked for, each distinct package once (pure: nothing is built).

The LLVM output renders to one build string for the whole python matrix, so it is one step, built once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from flagtree_feedstock.errors import ConfigurationError, NothingToDoError
from flagtree_feedstock.recipe.render import RenderedOutput


@dataclass(frozen=True, kw_only=True)
class BuildStep:
    """One package to build, once, whatever number of variants rendered it."""

    output: RenderedOutput
    variants: int
    # An output a chosen one pins, not chosen itself (:func:`with_pinned`): built when the output folder lacks
    # it, reused even with --force.
    pinned_only: bool = False

    @property
    def stem(self) -> str:
        """The package's file name without its suffix: name-version-build."""
        return "-".join(self.output.key)

    def describe(self) -> str:
        python = f" (python {self.output.python})" if self.output.python else ""
        return f"{self.output.name} {self.output.version} {self.output.build_string}{python}"


def select_outputs(
    outputs: Iterable[RenderedOutput], *, pythons: Sequence[str] = (), names: Sequence[str] = ()
) -> list[RenderedOutput]:
    """The outputs ``--python``/``--output`` ask for, in render order; a choice the matrix lacks is an error.

    Outputs that do not use python (LLVM, the noarch doctor) belong to every python variant and are kept.
    """
    outputs = list(outputs)
    all_names = sorted({o.name for o in outputs})
    missing = sorted(set(names) - set(all_names))
    if missing:
        raise ConfigurationError(
            f"--output {', '.join(missing)} is not an output of the recipe",
            fix=f"choose from {', '.join(all_names)}",
        )
    known = sorted({o.python for o in outputs if o.python})
    unknown = sorted(set(pythons) - set(known))
    if unknown:
        raise ConfigurationError(
            f"--python {', '.join(unknown)} is not in the variant file's python matrix",
            fix=f"choose from {', '.join(known) or 'no python variants'}",
        )
    selected = [
        o
        for o in outputs
        if (not pythons or o.python is None or o.python in pythons) and (not names or o.name in names)
    ]
    if not selected:
        raise NothingToDoError(
            f"no output of {', '.join(names)} is rendered for python {', '.join(pythons)}",
            fix="check the variant file's matrix with --render-only (without --python and --output)",
        )
    return selected


def with_pinned(
    selected: Iterable[RenderedOutput], outputs: Iterable[RenderedOutput]
) -> list[RenderedOutput]:
    """``selected`` and every output of ``outputs`` they pin (``pin_subpackage``, at any depth), in render
    order: a step's build/host environment is solved before its build from packages that exist, so what it
    pins is a step of its own before it (the output folder's own copy is reused, :func:`.run.run_plan`)."""
    outputs = list(outputs)
    by_key = {o.key: o for o in outputs}
    wanted = {o.key for o in selected}
    todo = [key for o in outputs if o.key in wanted for key in o.pinned]
    while todo:
        key = todo.pop()
        if key not in wanted and key in by_key:
            wanted.add(key)
            todo.extend(by_key[key].pinned)
    return [o for o in outputs if o.key in wanted]


def plan_builds(
    outputs: Iterable[RenderedOutput],
    *,
    pythons: Sequence[str] = (),
    names: Sequence[str] = (),
    chosen: Collection[tuple[str, str, str]] | None = None,
) -> list[BuildStep]:
    """Keep render order, drop python variants and outputs not asked for, build each distinct package once.

    ``chosen``: the keys of the outputs asked for, when ``outputs`` holds more (:func:`with_pinned`); the
    others' steps are ``pinned_only``."""
    counts: dict[tuple[str, str, str], int] = {}
    first: dict[tuple[str, str, str], RenderedOutput] = {}
    for output in select_outputs(outputs, pythons=pythons, names=names):
        counts[output.key] = counts.get(output.key, 0) + 1
        first.setdefault(output.key, output)
    return [
        BuildStep(output=o, variants=counts[k], pinned_only=chosen is not None and k not in chosen)
        for k, o in first.items()
    ]
