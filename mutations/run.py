"""Mutation testing: break the repository in realistic ways, one mutation at a time, and see the tests catch it.

    python mutations/run.py                  # every mutation of mutations/*.toml
    python mutations/run.py --only ID        # one (repeat --only for more)
    python mutations/run.py --list           # the catalogue; nothing runs

Each mutation (an entry of a ``mutations/*.toml`` file, tests/README.md has the format) replaces its ``find``
text, which must occur exactly once, in a scratch copy of the repository (the files git tracks or would track,
as they are in the working tree), runs its ``tests`` there with pytest, and puts the file back. It is caught
when those tests fail. First the same tests run on the unmutated copy and must pass, so a failure is the
mutation's. The copy's code is the code that runs: its ``src`` and ``flagtree-doctor/src`` come first on
PYTHONPATH (the editable install points at this working tree), and for every mutated module the runner checks
that Python imports it from the copy. No bytecode is written (a stale ``.pyc`` could hide a mutation), and
PYTEST_ADDOPTS is dropped (.ci/run's report option is not a mutation's).

The result is a table: caught (and the first test that failed), survived, skipped (an environment variable
in ``requires`` is unset), stale (the ``find`` text is not in its file exactly once), baseline-fails,
not-live (Python would import the mutated module from elsewhere) or timeout. Exit
status 0 when every mutation that ran was caught, 1 otherwise, 2 for a catalogue or command-line error. Not
part of `python -m pytest` (tests/test_mutations.py runs this script on a tiny catalogue).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomllib's backport, which the test extra installs there
    try:
        import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]  # 3.10 only
    except ModuleNotFoundError:
        sys.exit('mutations/run.py needs Python 3.11 or newer, or tomli (pip install -e ".[test]")')

ROOT = Path(__file__).resolve().parents[1]
# The folders of the repository's import packages (pyproject.toml's [tool.setuptools.packages.find]).
IMPORT_ROOTS = ("src", "flagtree-doctor/src")
KEYS = {"id", "file", "find", "replace", "tests", "why"}
OPTIONAL_KEYS = {"requires", "also"}
ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

Status = Literal["caught", "survived", "skipped", "stale", "baseline-fails", "not-live", "timeout"]


class CatalogueError(Exception):
    """A catalogue entry that cannot be run as written; the message names the file and the mutation."""


@dataclass(frozen=True, kw_only=True)
class Change:
    file: str
    find: str
    replace: str


@dataclass(frozen=True, kw_only=True)
class Mutation:
    id: str
    changes: tuple[Change, ...]
    tests: tuple[str, ...]
    why: str
    requires: tuple[str, ...]
    catalogue: str


@dataclass(kw_only=True)
class Result:
    id: str
    status: Status
    detail: str = ""
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)


def _change(where: str, entry: dict[str, Any]) -> Change:
    for key in ("file", "find", "replace"):
        if not isinstance(entry.get(key), str):
            raise CatalogueError(f"{where}: {key} must be a string")
    if entry["find"] == entry["replace"]:
        raise CatalogueError(f"{where}: replace is the same as find")
    return Change(file=entry["file"], find=entry["find"], replace=entry["replace"])


def load(paths: Iterable[Path]) -> list[Mutation]:
    """Every mutation of the catalogue files, checked for shape and unique ids (not yet against the files)."""
    mutations: list[Mutation] = []
    seen: dict[str, str] = {}
    for path in paths:
        try:
            entries = tomllib.loads(path.read_text(encoding="utf-8")).get("mutation", [])
        except tomllib.TOMLDecodeError as error:
            raise CatalogueError(f"{path.name}: not valid TOML: {error}") from None
        for number, entry in enumerate(entries, start=1):
            where = f"{path.name}: mutation {entry.get('id', f'#{number}')}"
            unknown, lacking = sorted(set(entry) - KEYS - OPTIONAL_KEYS), sorted(KEYS - set(entry))
            if unknown or lacking:
                raise CatalogueError(f"{where}: unknown keys {unknown}, missing keys {lacking}")
            if not (isinstance(entry["id"], str) and ID.fullmatch(entry["id"])):
                raise CatalogueError(f"{where}: id must be short-kebab-case")
            if entry["id"] in seen:
                raise CatalogueError(f"{where}: id {entry['id']} is also in {seen[entry['id']]}")
            seen[entry["id"]] = path.name
            tests, requires = entry["tests"], entry.get("requires", [])
            for key, value in (("tests", tests), ("requires", requires)):
                if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                    raise CatalogueError(f"{where}: {key} must be a list of strings")
            if not tests:
                raise CatalogueError(f"{where}: tests is empty")
            also = entry.get("also", [])
            if not isinstance(also, list):
                raise CatalogueError(f"{where}: also must be an array of tables (file, find, replace)")
            mutations.append(
                Mutation(
                    id=entry["id"],
                    changes=(_change(where, entry), *(_change(f"{where} (also)", a) for a in also)),
                    tests=tuple(tests),
                    why=str(entry["why"]),
                    requires=tuple(requires),
                    catalogue=path.name,
                )
            )
    return mutations


def stale(mutation: Mutation, root: Path) -> str | None:
    """Why the mutation cannot apply to ``root`` (a ``find`` not there exactly once), or None."""
    for change in mutation.changes:
        path = root / change.file
        if not path.is_file():
            return f"{change.file} does not exist"
        count = path.read_text(encoding="utf-8").count(change.find)
        if count != 1:
            return f"its find text occurs {count} times in {change.file}, not once"
    return None


def scratch_copy(root: Path, dest: Path) -> Path:
    """The repository's files as git sees them (tracked, and untracked but not ignored) copied to ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = root / name
        if source.is_file() or source.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    return dest


def environment(copy: Path) -> dict[str, str]:
    """The tests' environment: the copy's import packages first, no bytecode, no PYTEST_ADDOPTS, no workers."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    # One process: pyproject's `-n auto` would start a worker per core for the few tests of one mutation.
    env["PYTEST_XDIST_AUTO_NUM_WORKERS"] = "0"
    paths = [str(copy / root) for root in IMPORT_ROOTS if (copy / root).is_dir()]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def module_name(file: str) -> str | None:
    """``flagtree_feedstock.channel.upload`` for src/flagtree_feedstock/channel/upload.py; None outside the roots."""
    path = Path(file)
    for root in IMPORT_ROOTS:
        if path.suffix == ".py" and path.is_relative_to(root):
            parts = path.relative_to(root).with_suffix("").parts
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def imported_from(copy: Path, modules: Sequence[str], env: dict[str, str]) -> list[str]:
    """Where Python finds each of ``modules`` with the tests' environment (without running the modules)."""
    probe = (
        "import importlib.util, sys\nfor m in sys.argv[1:]:\n    print(importlib.util.find_spec(m).origin)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *modules], cwd=copy, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def pytest(copy: Path, tests: Sequence[str], env: dict[str, str], timeout: float) -> tuple[int, list[str]]:
    """Run ``tests`` in the copy; return pytest's exit status and the tests that failed or errored."""
    with tempfile.TemporaryDirectory(prefix="mutation-report-") as scratch:
        report = Path(scratch) / "report.xml"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={report}",
                *tests,
            ],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        failed = []
        if report.is_file():
            for case in ET.parse(report).getroot().iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed.append(node_id(copy, case.get("classname", ""), case.get("name", "")))
    if done.returncode not in (0, 1) and not failed:
        failed = [line for line in done.stdout.splitlines() if line.startswith(("ERROR", "FAILED"))][:1]
    return done.returncode, failed


def node_id(root: Path, classname: str, name: str) -> str:
    """pytest's node id (tests/test_x.py::TestK::test_y) of a JUnit test case, or classname::name."""
    parts = classname.split(".") if classname else []
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (root / path).is_file():
            return "::".join([path, *parts[end:], name])
    return "::".join(filter(None, (classname, name)))


def run_one(mutation: Mutation, copy: Path, env: dict[str, str], timeout: float) -> Result:
    """Apply the mutation to the copy, run its tests, put the files back."""
    files = [change.file for change in mutation.changes]
    originals = {change.file: (copy / change.file).read_text(encoding="utf-8") for change in mutation.changes}
    start = time.monotonic()
    try:
        for change in mutation.changes:
            path = copy / change.file
            path.write_text(path.read_text(encoding="utf-8").replace(change.find, change.replace, 1))
        python = [(file, module) for file in files if (module := module_name(file))]
        where = imported_from(copy, [module for _, module in python], env) if python else []
        outside = [
            f"{module} from {found}"
            for (file, module), found in zip(python, where, strict=True)
            if Path(found).resolve() != (copy / file).resolve()
        ]
        if outside:
            return Result(
                id=mutation.id, status="not-live", detail=f"imports {', '.join(outside)}", files=files
            )
        try:
            status, failed = pytest(copy, mutation.tests, env, timeout)
        except subprocess.TimeoutExpired:
            return Result(id=mutation.id, status="timeout", detail=f"after {timeout:.0f} s", files=files)
    finally:
        for name, text in originals.items():
            (copy / name).write_text(text, encoding="utf-8")
    seconds = time.monotonic() - start
    if status in (1, 2) and failed:  # 2: collection failed, e.g. a module the mutation broke
        return Result(id=mutation.id, status="caught", detail=failed[0], seconds=seconds, files=files)
    return Result(
        id=mutation.id,
        status="survived",
        detail=f"pytest exit status {status}: {', '.join(mutation.tests)} passed",
        seconds=seconds,
        files=files,
    )


def run(mutations: list[Mutation], root: Path, timeout: float, console: Console) -> list[Result]:
    """Every mutation against one scratch copy of ``root``, after a baseline run of their tests."""
    results: dict[str, Result] = {}
    runnable = []
    for mutation in mutations:
        unset = [name for name in mutation.requires if not os.environ.get(name)]
        if unset:
            results[mutation.id] = Result(
                id=mutation.id, status="skipped", detail=f"{', '.join(unset)} unset"
            )
        elif reason := stale(mutation, root):
            results[mutation.id] = Result(id=mutation.id, status="stale", detail=reason)
        else:
            runnable.append(mutation)
    with tempfile.TemporaryDirectory(prefix="flagtree-mutations-") as scratch:
        copy = scratch_copy(root, Path(scratch))
        env = environment(copy)
        tests = list(dict.fromkeys(t for m in runnable for t in m.tests))
        if tests:
            console.print(f"baseline: {len(tests)} test selections on the unmutated copy", style="dim")
            status, failed = pytest(copy, tests, env, timeout)
            if status != 0:
                for mutation in runnable:  # only now one run per mutation, to tell whose tests fail
                    status, failed = pytest(copy, mutation.tests, env, timeout)
                    if status != 0:
                        detail = f"fails unmutated: {failed[0] if failed else f'exit status {status}'}"
                        results[mutation.id] = Result(id=mutation.id, status="baseline-fails", detail=detail)
        for mutation in runnable:
            if mutation.id in results:
                continue
            console.print(f"{mutation.id}: {mutation.why}", style="dim")
            results[mutation.id] = run_one(mutation, copy, env, timeout)
    return [results[m.id] for m in mutations]


STYLE = {"caught": "green", "survived": "bold red", "skipped": "yellow"}


def table(mutations: list[Mutation], results: list[Result]) -> Table:
    out = Table(title="mutations", title_justify="left")
    for column in ("mutation", "file", "result", "caught by / why not", "s"):
        out.add_column(column, overflow="fold")
    for mutation, result in zip(mutations, results, strict=True):
        style = STYLE.get(result.status, "red")
        files = ", ".join(change.file for change in mutation.changes)
        seconds = f"{result.seconds:.0f}" if result.seconds else ""
        out.add_row(mutation.id, files, f"[{style}]{result.status}[/]", result.detail, seconds)
    return out


def catalogue_table(mutations: list[Mutation]) -> Table:
    out = Table(title="mutation catalogue", title_justify="left")
    for column in ("mutation", "catalogue", "file", "tests", "why", "requires"):
        out.add_column(column, overflow="fold")
    for m in mutations:
        files = ", ".join(change.file for change in m.changes)
        out.add_row(m.id, m.catalogue, files, "\n".join(m.tests), m.why, ", ".join(m.requires))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mutations/run.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="ID", help="run this mutation (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the catalogue and run nothing")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per pytest run (default 900)")
    args = parser.parse_args(argv)
    # The table on stdout (JSON instead with --json), wide enough for its columns when piped; progress on stderr.
    columns = os.environ.get("COLUMNS", "")
    console = Console(
        stderr=args.json, width=int(columns) if columns.isdigit() else max(Console().width, 160)
    )
    progress = Console(stderr=True, width=console.width)
    root = args.root.resolve()
    try:
        mutations = load(sorted((root / "mutations").glob("*.toml")))
    except CatalogueError as error:
        print(f"mutations/run.py: error: {error}", file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {m.id for m in mutations})
        if unknown:
            print(f"mutations/run.py: error: no mutation {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 2
        mutations = [m for m in mutations if m.id in args.only]
    if args.list:
        console.print(catalogue_table(mutations))
        return 0
    results = run(mutations, root, args.timeout, progress)
    counts = {status: sum(r.status == status for r in results) for status in dict.fromkeys(STYLE)}
    others = len(results) - sum(counts.values())
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=1))
    else:
        console.print(table(mutations, results))
        console.print(
            f"{counts['caught']} caught, {counts['survived']} survived, {counts['skipped']} skipped, "
            f"{others} could not run (stale, baseline-fails, not-live, timeout)"
        )
    return 0 if counts["survived"] == 0 and others == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
