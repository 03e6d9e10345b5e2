"""flagtree-doctor package test, run by both recipes: every command the package installs works, on its own.

The package holds the runtime diagnostics only (the repository's flagtree-doctor/ distribution): each console
script it declares is on PATH and answers ``--help`` and ``--version`` (the package's version), ``flagtree-doctor --list`` names the checks,
``flagtree-verify --json`` where FlagTree is absent is one JSON error object with exit status 2, and the
build toolkit (``flagtree_feedstock``, py-rattler-build) is not installed with it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys

DISTRIBUTION = "flagtree-doctor"
COMMANDS = frozenset({"flagtree-doctor", "flagtree-verify"})
TOOLKIT_MODULES = ("flagtree_feedstock", "rattler_build", "rattler")
EXIT_NOT_INSTALLED = 2


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or ["(no output)"])[-1]


def check() -> list[str]:
    errors = []
    entry_points = importlib.metadata.distribution(DISTRIBUTION).entry_points
    scripts = {ep.name for ep in entry_points if ep.group == "console_scripts"}
    if scripts != COMMANDS:
        errors.append(f"{DISTRIBUTION} declares the commands {sorted(scripts)}, not {sorted(COMMANDS)}")
    for name in sorted(scripts):
        path = shutil.which(name)
        if path is None:
            errors.append(f"{name} is not on PATH")
            continue
        done = _run(path, "--help")
        if done.returncode != 0:
            errors.append(f"{name} --help exits {done.returncode}: {_last_line(done.stderr)}")
    # The distribution's version is the package's (the recipe's, passed at build time): each command says it.
    version = importlib.metadata.version(DISTRIBUTION)
    for name in sorted(COMMANDS):
        said = _run(name, "--version").stdout.strip()
        if said != f"{name} {version}":
            errors.append(f"{name} --version says {said!r}, not {name} {version}")
    listed = _run("flagtree-doctor", "--list")
    if listed.returncode != 0 or not listed.stdout.startswith("cpu-features"):
        errors.append(f"flagtree-doctor --list exits {listed.returncode}: {_last_line(listed.stderr)}")
    if importlib.util.find_spec("triton") is None:
        done = _run("flagtree-verify", "--json")
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            report = {}
        if done.returncode != EXIT_NOT_INSTALLED or "error" not in report:
            errors.append(
                f"flagtree-verify --json without FlagTree exits {done.returncode} and prints "
                f"{_last_line(done.stdout)!r}, not exit {EXIT_NOT_INSTALLED} with a JSON error object"
            )
    errors += [
        f"{module} (the build toolkit) is installed with {DISTRIBUTION}"
        for module in TOOLKIT_MODULES
        if importlib.util.find_spec(module) is not None
    ]
    return errors


def main() -> int:
    errors = check()
    for error in errors:
        print(f"FAIL: {error}")
    if not errors:
        print(f"OK: {', '.join(sorted(COMMANDS))} work on their own, without the build toolkit")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
