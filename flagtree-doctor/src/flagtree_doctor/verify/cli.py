"""``flagtree-verify [--json | --version] [--repeat N] [--force] [OP ...]``: the flagtree-cpu package test.

Exit status: 0 every step passed (or was skipped, or is an op this CPU cannot run: ``unsupported``, with why),
1 a step failed or raised (also: kernels were skipped
where ``FLAGTREE_REQUIRE_KERNELS=1`` requires them), 2 bad input, or FlagTree (or torch) is not installed
here, so there is nothing to verify. Under ``--json`` every outcome, an error too, is one JSON object.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flagtree_doctor._cli import ArgumentParser, report_error
from flagtree_doctor._version import version
from flagtree_doctor.cpu_check import REQUIRE_KERNELS, kernel_blockers, kernels_required, live_choice
from flagtree_doctor.errors import ConfigurationError, DoctorError, NotInstalledError
from flagtree_doctor.manifest import read_manifest, unsupported_ops
from flagtree_doctor.target import BASELINE_RUNTIME
from flagtree_doctor.terminal import new_console, print_json

from .ops import NOT_EXERCISED, OP_NAMES, Outcome, check_install, run_ops, unsupported_steps
from .references import TOLERANCES

PROG = "flagtree-verify"
SCHEMA_VERSION = "1"


def _parser(prog: str) -> ArgumentParser:
    parser = ArgumentParser(
        prog=prog, description="Verify the FlagTree cpu install and each TLE op against torch."
    )
    parser.add_argument("ops", nargs="*", metavar="OP", help=f"run only these ops: {', '.join(OP_NAMES)}")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--json", action="store_true", help="print one JSON object (schema_version 1)")
    mode.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per op and reference [20]")
    parser.add_argument(
        "--force", action="store_true", help="run the kernels even where flagtree-doctor says this CPU cannot"
    )
    return parser


def _require_installed() -> None:
    for module, what, fix in (
        ("triton", "FlagTree", "conda install flagtree-cpu"),
        ("torch", "torch", "conda install pytorch-cpu"),
    ):
        if importlib.util.find_spec(module) is None:
            raise NotInstalledError(
                f"{what} is not installed (no module {module!r}); nothing to verify", fix=fix
            )


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    console: Console | None = None,
    prog: str = PROG,
) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    out = console or new_console()
    as_json = "--json" in argv
    try:
        args = _parser(prog).parse_args(argv)
        if args.version:
            out.print(f"{prog} {version()}")
            return 0
        unknown = sorted(set(args.ops) - set(OP_NAMES))
        if unknown:
            raise ConfigurationError(f"unknown op {unknown[0]!r}", fix=f"choose from {', '.join(OP_NAMES)}")
        required = kernels_required(env)
        _require_installed()
    except DoctorError as exc:
        return report_error(exc, prog=prog, as_json=as_json, schema_version=SCHEMA_VERSION, out=out)
    blockers = [] if args.force else kernel_blockers()
    outcomes = verify(
        importlib.import_module("triton"),
        tuple(args.ops) or OP_NAMES,
        repeat=args.repeat,
        blockers=blockers,
        kernels_required=required,
        force=args.force,
    )
    gate = next((o for o in outcomes if o.name == "ops" and o.status == "fail"), None)
    if gate is not None:  # the kernels were required here: the one line CI logs show
        print(f"{prog}: error: {gate.detail}", file=sys.stderr)
    if args.json:
        print_json(out, to_json(outcomes))
    else:
        out.print(table(outcomes))
        out.print(
            escape("tolerances: " + "; ".join(f"{k} {t.describe()} ({t.why})" for k, t in TOLERANCES.items()))
        )
    return 1 if any(o.status in ("fail", "error") for o in outcomes) else 0


def verify(
    triton: ModuleType,
    names: Sequence[str],
    *,
    repeat: int,
    blockers: Sequence[str],
    kernels_required: bool = False,
    force: bool = False,
) -> list[Outcome]:
    """The install checks, then the ops: unless the install is broken or this CPU cannot run the kernels.

    Kernels this CPU cannot run are skipped, or, where the job requires them, a failure naming why. On the
    baseline runtime the ops whose runtime function needs what this CPU lacks are listed as unsupported
    (``force`` runs them too).
    """
    outcomes = check_install(triton)
    if not all(o.status == "pass" for o in outcomes):
        outcomes.append(Outcome(name="ops", status="skip", detail="the install checks failed"))
    elif blockers and kernels_required:
        detail = f"{REQUIRE_KERNELS}=1, but this CPU cannot run the kernels: {'; '.join(blockers)}"
        outcomes.append(Outcome(name="ops", status="fail", detail=detail))
    elif blockers:
        detail = (
            f"kernels not run: {'; '.join(blockers)} (flagtree-doctor explains; --force runs them anyway)"
        )
        outcomes.append(Outcome(name="ops", status="skip", detail=detail))
    else:
        try:
            unsupported = {} if force else _unsupported(triton)
        except Exception as exc:  # noqa: BLE001 - a damaged manifest is this step's error, not a crash
            outcomes.append(Outcome(name="ops", status="error", detail=f"{type(exc).__name__}: {exc}"))
            return outcomes
        outcomes += run_ops(tuple(names), repeat=repeat, unsupported=unsupported)
    return outcomes


def _unsupported(triton: ModuleType) -> dict[str, str]:
    """The steps this CPU cannot run on its runtime (the baseline one's manifest says which), with why."""
    choice = live_choice()
    if choice.tier != "baseline" or triton.__file__ is None:
        return {}
    c_dir = Path(triton.__file__).parent / "_C"
    return unsupported_steps(
        unsupported_ops(read_manifest(c_dir / str(BASELINE_RUNTIME.manifest)), choice.features)
    )


def to_json(outcomes: Sequence[Outcome]) -> dict[str, object]:
    return {
        "schema_version": SCHEMA_VERSION,
        "results": [
            {
                "name": o.name,
                "status": o.status,
                "detail": o.detail,
                "tolerance": o.tolerance,
                "max_abs_error": o.max_abs_error,
                "op_ms": o.op_ms,
                "reference_ms": o.reference_ms,
            }
            for o in outcomes
        ],
        "not_exercised": list(NOT_EXERCISED),
    }


def table(outcomes: Sequence[Outcome]) -> Table:
    grid = Table(box=box.SIMPLE, show_edge=False, pad_edge=False)
    for column in ("step", "status", "tolerance", "max |err|", "op ms", "torch ms", "detail"):
        grid.add_column(column, overflow="fold")

    def number(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    for o in outcomes:
        grid.add_row(
            o.name,
            o.status,
            o.tolerance or "-",
            number(o.max_abs_error, ".3g"),
            number(o.op_ms, ".3f"),
            number(o.reference_ms, ".3f"),
            escape(o.detail),
        )
    return grid
