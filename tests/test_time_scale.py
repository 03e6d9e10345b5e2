"""One time scale for the tests (tests/_timing.py): ``FLAGTREE_TEST_TIME_SCALE`` multiplies every timeout, deadline
and bounded wait of ``tests/``, and no literal one is written anywhere else.

The check reads every Python file of ``tests/`` (an AST, so comments and names do not count) and reports a number
written where a time bound goes: a ``timeout=`` (or a ``*_timeout``/``seconds``/``delay``/``grace`` argument,
parameter default or constant), a ``sleep``/``wait``/``join``/``select`` argument, a sum or comparison with the
clock (``time.monotonic() + 60``, ``took < 10``), a ``*_SECONDS`` environment value, a ``--*timeout`` option's
value, a ``sleep`` command line (``["sleep", "30"]``, ``"import time; time.sleep(30)"``). Inside ``seconds(...)``
or ``seconds_arg(...)`` a number is a bound on the scale. The toy recipes' shell ``sleep N`` are read too. What is
genuinely not a wait is in :data:`ALLOWED`, each with its reason.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

import _timing

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# Names of calls that wait for their argument's seconds (a positional number is a time).
_SLEEPS = {"sleep"}
# Calls whose `timeout` keyword or first positional argument is a time (a thread's join, a process's wait).
_WAITS = {"wait", "join", "communicate", "get", "acquire"}
# A keyword argument, parameter or assigned name that holds a time.
_TIME_NAME = re.compile(
    r"(^|_)(timeout|timeouts|deadline|seconds|delay|grace|lifetime|held|pause|ends|limit_s|trickle|interim)$",
    re.IGNORECASE,
)
# A name (or attribute) that holds a measured duration, compared with a bound.
_DURATION_NAME = re.compile(r"^(took|elapsed|ended|start_up|duration|waited|seconds)$")
_CLOCKS = {"monotonic", "time", "perf_counter"}
# The calls that put a number on the scale.
_SCALED = {"seconds", "seconds_arg"}

# (file relative to tests/, a text its flagged lines hold): why that is not a bound on a wait.
ALLOWED = {
    ("test_one_product.py", "time.sleep(1.1)"): (
        "the clock is made to pass a whole second, so that anything stamped with the time would differ: not a "
        "wait for an event"
    ),
    (
        "test_rehearsal_reproducible.py",
        "time.sleep(1.1)",
    ): "the same: a rebuild a second later gives the same bytes",
    ("test_interrupts.py", "time.monotonic() + 0.3"): (
        "how long a thread works on after py-rattler returns: a stand-in for its workers, which the toolkit waits "
        "for at most 2 s (its own constant), so it may not grow with the scale"
    ),
    ("test_index_stand_ins.py", "time.sleep(0.01)"): (
        "the clock made to pass at least a millisecond (repodata's time unit), so that a first-indexed time kept "
        "from before differs from the packages indexed now: not a wait for an event"
    ),
    ("_http_recorder.py", "time.sleep(0.01)"): (
        "the pace of an endless `100 Continue` (the rule's `interim` seconds bound it, given on the scale)"
    ),
    ("_publish_standins.py", "self._server.timeout = 0.2"): (
        "how soon the stand-in's loop sees that it was stopped: an interval (its `lifetime` is the bound)"
    ),
    ("recipes/toy-slow/recipe.yaml", "sleep 0.02; done"): (
        "the escaping process forks a child every 20 ms: a pace, not a bound (its children sleep the scaled hold)"
    ),
    ("recipes/toy-slow/recipe.yaml", "sleep 0.05; done"): (
        "the build script's polling loop looks every 50 ms: an interval (the scaled hold bounds it)"
    ),
}


def _allowed(path: str, line: str) -> bool:
    return any(path == where and text in line for where, text in ALLOWED)


def _number(node: ast.AST) -> bool:
    """A number other than 0 written as such, or as a string (a command-line or environment value). Zero is no
    bound: no wait at all (a moment only marked, a sleep that only yields)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            return False
        if isinstance(node.value, int | float):
            return node.value != 0
        if isinstance(node.value, str):
            return re.fullmatch(r"\d+(\.\d+)?", node.value.strip()) is not None and float(node.value) != 0
    return False


def _name_of(node: ast.AST) -> str:
    """The last name of a call's function, an assignment's target (``a.b.timeout`` -> ``timeout``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name_of(node.func)
    return ""


def _unscaled_numbers(node: ast.AST) -> bool:
    """Whether ``node`` holds a number outside ``seconds(...)``/``seconds_arg(...)`` (not in an index or a slice)."""
    if isinstance(node, ast.Call) and _name_of(node) in _SCALED:
        return False
    if isinstance(node, ast.Subscript):
        return _unscaled_numbers(node.value)
    if _number(node):
        return True
    return any(_unscaled_numbers(child) for child in ast.iter_child_nodes(node))


def _reads_the_clock(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and _name_of(n) in _CLOCKS and isinstance(n.func, ast.Attribute)
        for n in ast.walk(node)
    )


def _durations(tree: ast.AST) -> set[str]:
    """Names assigned a reading of the clock anywhere in ``tree`` (``took = time.monotonic() - sent``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _reads_the_clock(node.value):
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found


def _code_strings(node: ast.AST) -> Iterator[ast.AST]:
    """Python code in a string constant (``python -c``'s argument) that sleeps, parsed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "sleep(" in node.value:
        try:
            yield ast.parse(node.value)
        except SyntaxError:
            return


def _in_a_call(node: ast.Call) -> set[int]:
    """A sleep's, wait's, join's or select's number, a time keyword's (``timeout=60``), a ``Timeouts(5, 1)``,
    a command line's ``"sleep", "30"`` or ``"--timeout", "2"``."""
    name = _name_of(node)
    values = [*node.args, *(k.value for k in node.keywords)]
    found = {
        node.lineno
        for hit in (
            name in _SLEEPS and any(map(_unscaled_numbers, node.args)),
            name in _WAITS and bool(node.args) and _number(node.args[0]),  # thread.join(5), process.wait(60)
            name == "poll_until" and any(map(_unscaled_numbers, node.args[2:])),
            name == "select" and len(node.args) >= 4 and _unscaled_numbers(node.args[3]),
            name not in _SCALED and bool(_TIME_NAME.search(name)) and any(map(_unscaled_numbers, values)),
        )
        if hit
    }
    found |= {
        k.value.lineno
        for k in node.keywords
        if k.arg and _TIME_NAME.search(k.arg) and _unscaled_numbers(k.value)
    }
    for sequence in (node.args, *(a.elts for a in node.args if isinstance(a, ast.List | ast.Tuple))):
        found |= _command_line_waits(list(sequence))
    return found


def _in_a_sequence(node: ast.List | ast.Tuple) -> set[int]:
    return _command_line_waits(node.elts)


def _in_a_dict(node: ast.Dict) -> set[int]:
    """An environment's ``"..._SECONDS": "2"``, a server rule's ``"delay": 30``."""
    return {
        value.lineno
        for key, value in zip(node.keys, node.values, strict=True)
        if isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and (re.search(r"_SECONDS$|_TIMEOUT$", key.value) or _TIME_NAME.search(key.value))
        and (_number(value) or (isinstance(value, ast.BinOp) and _unscaled_numbers(value)))
    }


def _in_defaults(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[int]:
    """A time parameter's default: ``def f(timeout: float = 20)``."""
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = [
        *zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True),
        *((a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d),
    ]
    return {d.lineno for a, d in pairs if _TIME_NAME.search(a.arg) and _unscaled_numbers(d)}


def _in_an_assignment(node: ast.Assign | ast.AnnAssign) -> set[int]:
    """A time constant or attribute: ``HELD = 30.0``, ``server.timeout = 0.2``."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    timed = any(_TIME_NAME.search(_name_of(t)) for t in targets)
    return {node.lineno} if timed and node.value is not None and _unscaled_numbers(node.value) else set()


def _in_a_sum(node: ast.BinOp) -> set[int]:
    """A deadline: ``time.monotonic() + 60``."""
    return {node.lineno} if _reads_the_clock(node) and _unscaled_numbers(node) else set()


def _in_a_comparison(node: ast.Compare, durations: set[str]) -> set[int]:
    """A duration against a number: ``time.monotonic() - started < 30``, ``took < 10``, ``done.seconds < 60``."""
    sides = [node.left, *node.comparators]
    timed = any(
        _reads_the_clock(side)
        or any(
            isinstance(n, ast.Name | ast.Attribute)
            and (_name_of(n) in durations or _DURATION_NAME.match(_name_of(n)))
            for n in ast.walk(side)
        )
        for side in sides
    )
    return {node.lineno} if timed and any(map(_unscaled_numbers, sides)) else set()


_RULES: dict[type | tuple[type, ...], Callable[[Any], set[int]]] = {
    ast.Call: _in_a_call,
    (ast.List, ast.Tuple): _in_a_sequence,
    ast.Dict: _in_a_dict,
    (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda): _in_defaults,
    (ast.Assign, ast.AnnAssign): _in_an_assignment,
    ast.BinOp: _in_a_sum,
}


def literal_waits(source: str) -> list[int]:
    """The line numbers of ``source`` (Python) where a time bound is written as a number, not on the scale."""
    tree = ast.parse(source)
    durations = _durations(tree)
    found: set[int] = set()
    for node in ast.walk(tree):
        if any(literal_waits(ast.unparse(code)) for code in _code_strings(node)):
            found.add(node.lineno)  # type: ignore[attr-defined]
        if isinstance(node, ast.Compare):
            found |= _in_a_comparison(node, durations)
        for kinds, rule in _RULES.items():
            if isinstance(node, kinds):
                found |= rule(node)
    return sorted(found)


def _command_line_waits(elements: list[ast.expr]) -> set[int]:
    """``"sleep", "30"`` or ``"--timeout", "2"`` next to each other in a command line."""
    return {
        second.lineno
        for first, second in itertools.pairwise(elements)
        if isinstance(first, ast.Constant)
        and isinstance(first.value, str)
        and (first.value == "sleep" or re.fullmatch(r"--[\w-]*timeout", first.value))
        and _number(second)
    }


# `sleep N` in a shell line of a toy recipe or a script of tests/ (N a number, not a variable).
_SHELL_SLEEP = re.compile(r"\bsleep\s+\d")


def shell_waits(text: str) -> list[int]:
    return [number for number, line in enumerate(text.splitlines(), 1) if _SHELL_SLEEP.search(line)]


@cache
def findings(root: Path = TESTS) -> tuple[tuple[str, int, str], ...]:
    """Every literal wait under ``root`` (tests/): its file (relative), line number and line, stripped."""
    return tuple(_findings(root))


def _findings(root: Path) -> Iterator[tuple[str, int, str]]:
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        # The scale's own module, and this one (its examples of what the check finds are the point).
        if (
            relative.startswith("data/")
            or "__pycache__" in relative
            or relative in {"_timing.py", Path(__file__).name}
        ):
            continue
        if path.suffix == ".py":
            lines = path.read_text(encoding="utf-8").splitlines()
            numbers = literal_waits(path.read_text(encoding="utf-8"))
        elif path.suffix in {".yaml", ".sh"}:
            lines = path.read_text(encoding="utf-8").splitlines()
            numbers = shell_waits(path.read_text(encoding="utf-8"))
        else:
            continue
        for number in numbers:
            yield relative, number, lines[number - 1].strip()


def test_no_literal_wait_in_the_tests() -> None:
    """Every timeout, deadline and wait of tests/ is on the scale (tests/_timing.py), or allowed with a reason."""
    found = [
        f"tests/{path}:{number}: {line}" for path, number, line in findings() if not _allowed(path, line)
    ]
    assert found == [], (
        "a time bound written as a number: write seconds(N) of tests/_timing.py\n" + "\n".join(found)
    )


def test_every_allowed_wait_is_still_there() -> None:
    """An allow-list entry whose line is gone (or no longer flagged) goes too."""
    flagged = findings()
    unused = [
        entry for entry in ALLOWED if not any(p == entry[0] and entry[1] in line for p, _, line in flagged)
    ]
    assert unused == []


@pytest.mark.parametrize(
    "source",
    [
        "time.sleep(0.5)",
        "sleep(2 + x)",
        "process.wait(timeout=60)",
        "process.wait(60)",
        "poll_until(lambda: done, 'it ends', 20)",
        "subprocess.run(argv, timeout=300)",
        "thread.join(5)",
        "select.select([r], [], [], 30)",
        "def f(timeout: float = 20): ...",
        "def f(*, grace=1.5): ...",
        "HELD = 30.0",
        "self._server.timeout = 0.2",
        "deadline = time.monotonic() + 60",
        "while time.monotonic() < ends + 1: ...",
        "assert time.monotonic() - started < 30",
        "took = time.monotonic() - sent\nassert took < 10",
        "done, took = run()\nassert took < 10",
        "assert done.peak_kib < LIMIT and done.seconds < 60",
        "env = {'FLAGTREE_TEST_PAUSE_SECONDS': '2'}",
        "rules = [{'path': '/x', 'status': 200, 'delay': 30}]",
        "answer = {'status': 200, 'trickle': 0.25}",
        "monkeypatch.setattr(fetch, 'TIMEOUTS', Timeouts(connect=2, read=2))",
        "subprocess.Popen(['sleep', '30'])",
        "argv = [*base, '--timeout', '2']",
        "run([*base, '--llvm-archive-timeout', '2'])",
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])",
        "Timeouts(connect=5, read=0.5, total=0.5)",
        "open_request('GET', url, timeouts=Timeouts(5, 1, 1))",
        "gave_up.wait(timeout=seconds(5) + 1)",
    ],
)
def test_the_check_finds_a_literal_wait(source: str) -> None:
    assert literal_waits(source), source


@pytest.mark.parametrize(
    "source",
    [
        "time.sleep(seconds(0.5))",
        "process.wait(timeout=seconds(60))",
        "subprocess.run(argv, timeout=seconds(300))",
        "HELD = seconds(30)",
        "deadline = time.monotonic() + seconds(60)",
        "took = time.monotonic() - sent\nassert took < seconds(10)",
        "env = {'FLAGTREE_TEST_PAUSE_SECONDS': seconds_arg(2)}",
        "argv = [*base, '--timeout', seconds_arg(2)]",
        "subprocess.Popen(['sleep', seconds_arg(30)])",
        "time.sleep(POLL)",
        "time.sleep(0)",
        "start(argv, pause, tmp_path, seconds=0)",
        "poll_until(lambda: len(x) > 3, 'it ends', seconds(20))",
        "', '.join(['0x3f80'] * 8)",
        "process.wait()",
        "', '.join(names)",
        "os.path.join(a, 'b')",
        "lines[-1].startswith('x')",
        "assert len(found) < 10",
        "retries = 3",
        "items.get('x', 0)",
        "subprocess.run(argv, check=False)",
    ],
)
def test_the_check_lets_a_scaled_wait_pass(source: str) -> None:
    assert literal_waits(source) == [], source


def test_the_shell_check_finds_a_literal_sleep() -> None:
    assert shell_waits('a\nsleep 60 &\nsleep "$hold"\nwhile :; do sleep 0.05; done\n') == [2, 4]


@pytest.mark.parametrize(
    ("value", "scale"), [(None, 1.0), ("", 1.0), (" 3 ", 3.0), ("0.5", 0.5), ("1e1", 10.0)]
)
def test_the_scale_is_read_from_the_variable(value: str | None, scale: float) -> None:
    assert _timing.read_scale({} if value is None else {_timing.VARIABLE: value}) == scale


@pytest.mark.parametrize("value", ["fast", "0", "-2", "nan", "inf", "2s"])
def test_a_scale_that_is_not_a_number_above_zero_is_refused(value: str) -> None:
    with pytest.raises(
        ValueError, match=rf"^{_timing.VARIABLE}='{re.escape(value)}' is not a number above 0 "
    ):
        _timing.read_scale({_timing.VARIABLE: value})


def test_the_scale_multiplies_every_bound_and_not_the_poll_interval() -> None:
    """In a fresh interpreter whose environment sets the scale: seconds() and seconds_arg() follow it."""
    env = {**os.environ, _timing.VARIABLE: "3"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", "import _timing; print(_timing.seconds(2), _timing.seconds_arg(2.5), _timing.POLL)"],
        capture_output=True, text=True, env=env, check=False, timeout=_timing.seconds(60),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["6.0", "7.5", str(_timing.POLL)]


def test_a_bad_scale_stops_the_run_in_one_line() -> None:
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, _timing.VARIABLE: "fast"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "tests/test_time_scale.py"],
        cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=_timing.seconds(120),
    )  # fmt: skip
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert (done.stdout + done.stderr).strip() == (
        f"ERROR: {_timing.VARIABLE}='fast' is not a number above 0 (it multiplies every timeout of the tests: "
        "set it to e.g. 2 on a slow or shared machine, or unset it)"
    )


def test_a_run_s_poll_until_gives_up_at_the_scaled_bound() -> None:
    """A condition that never comes: the failure names the bound and the scale, after that bound."""
    with pytest.raises(
        pytest.fail.Exception, match=r"never: not within [\d.]+ s \(FLAGTREE_TEST_TIME_SCALE is "
    ):
        _timing.poll_until(lambda: False, "never", _timing.seconds(0.05))


def test_the_workflow_s_tests_job_takes_the_scale_from_the_repository_s_variable() -> None:
    """GitHub's runners are shared: the scale is a repository variable, raised there without a commit; unset, 1.
    (.ci/run passes on what it is given: tests/test_ci.py.)"""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "build.yml").read_text())
    value = workflow["jobs"]["tests"]["env"][_timing.VARIABLE]
    assert value == "${{ vars.FLAGTREE_TEST_TIME_SCALE || '1' }}"
