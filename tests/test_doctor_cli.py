"""flagtree-doctor's and flagtree-verify's command line around the checks (issue 16, item 6).

--version on both commands; the same top-level version key, ``schema_version``, in every JSON document
either prints (reports and errors); a --root tree's proc/cpuinfo that is empty, unreadable or not a cpuinfo
named as the problem; a recorded tree judged on what it records (the environment and toolchain checks,
which read the machine the doctor runs on, skipped with that reason), so a suitable machine exits 0; and one
line, not fourteen, for the checks skipped for the same reason.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from _peak_memory import MEMORY_LIMIT_KIB, run_measured
from _timing import seconds
from flagtree_doctor import __version__
from flagtree_doctor.bounded import MAX_FILE
from flagtree_doctor.checks import CHECKS
from flagtree_doctor.cli import main as doctor
from flagtree_doctor.verify.cli import main as verify

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "doctor"
MACHINE_GROUPS = ("environment", "toolchain")
READS_THIS_MACHINE = [c.id for c in CHECKS if c.group in MACHINE_GROUPS]
TREE_REASON = "environment and toolchain checks read the machine the doctor runs on, not a --root tree"


def run(command: object, argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    console = Console(record=True, width=400, no_color=True, highlight=False)
    assert callable(command)
    status = command(argv, env=env if env is not None else {"PATH": "/usr/bin:/bin"}, console=console)
    return status, console.export_text()


def test_the_version_is_the_package_s() -> None:
    """The conda package's version, the recipe's (flagtree-doctor/pyproject.toml declares none of its own)."""
    pins = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())
    assert __version__ == pins["flagtree_version"][0]


@pytest.mark.parametrize("prog", ["flagtree-doctor", "flagtree-verify"])
def test_version_on_both_commands(prog: str) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name(prog)), "--version"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{prog} {__version__}\n", "")


@pytest.mark.parametrize(("command", "prog"), [(doctor, "flagtree-doctor"), (verify, "flagtree-verify")])
def test_version_and_json_are_one_or_the_other(command: object, prog: str, capsys) -> None:
    """A caller that parses --json output still gets JSON: the version is not printed as text there."""
    status, text = run(command, ["--version", "--json"])
    assert status == 2
    assert json.loads(text)["error"]["message"] == "argument --json: not allowed with argument --version"
    assert capsys.readouterr().err.startswith(f"{prog}: error: argument --json: not allowed")


# Every JSON document the two commands print: reports, and errors of each kind.
DOCUMENTS = {
    "doctor report": (doctor, ["--root", str(DATA / "neoverse-n2"), "--json"]),
    "doctor usage error": (doctor, ["--json", "--shout"]),
    "doctor bad root": (doctor, ["--json", "--root", "/nonexistent"]),
    "doctor unknown check": (doctor, ["--json", "glibcxxx"]),
    "verify usage error": (verify, ["--json", "--repeat", "many"]),
    "verify unknown op": (verify, ["--json", "gemm"]),
    "verify bad setting": (verify, ["--json"]),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_json_document_leads_with_schema_version(name: str, capsys) -> None:
    command, argv = DOCUMENTS[name]
    env = {"FLAGTREE_REQUIRE_KERNELS": "maybe"} if name == "verify bad setting" else None
    _, text = run(command, argv, env)
    document = json.loads(text)
    assert next(iter(document)) == "schema_version"
    assert document["schema_version"] == "1"
    assert "version" not in document
    if "report" not in name:
        assert set(document) == {"schema_version", "error"}
    capsys.readouterr()


@pytest.mark.parametrize("machine", ["neoverse-n2", "cix-p1-orion-o6"])
def test_a_suitable_recorded_machine_passes(machine: str) -> None:
    """Every check the tree can answer passes (or warns); those that read this machine say why they skip."""
    status, text = run(doctor, ["--root", str(DATA / machine), "--json"])
    report = json.loads(text)
    checks = {c["id"]: c for c in report["checks"]}
    assert status == 0
    assert {i: c["message"] for i, c in checks.items() if i in READS_THIS_MACHINE} == dict.fromkeys(
        READS_THIS_MACHINE, TREE_REASON
    )
    assert {checks[i]["status"] for i in READS_THIS_MACHINE} == {"skip"}
    assert [c["status"] for c in report["checks"] if c["status"] == "fail"] == []


def test_the_recorded_tree_skips_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    status, text = run(doctor, ["--root", str(DATA / "neoverse-n2")])
    assert status == 0
    lines = text.splitlines()
    assert [line for line in lines if TREE_REASON in line] == [
        f"skipped, since {TREE_REASON}: {', '.join(READS_THIS_MACHINE)}"
    ]
    assert not [line for line in lines if line.startswith(tuple(READS_THIS_MACHINE))]


OFF_AARCH64_TRANSCRIPT = """\
check          status   message                                          fix
────────────────────────────────────────────────────────────────────────────────────────────────────────────────────────
cpu-features   fail     this machine is unknown; flagtree-cpu runs on    run on an aarch64 machine with dotprod (Armv8.2
                        aarch64 (Arm64) only                             or newer, e.g. Neoverse N1 or Cortex-A76)
skipped, since this machine is unknown and flagtree-cpu runs on aarch64 only (see cpu-features): sve-vector-length,
core-types, cpufreq-governor, env-flagtree-backend, env-triton-sys-path, env-cc, jit-compiler, binutils, openmp,
python-headers, triton-install, tle-ops, glibc, glibcxx, triton-load
0 ok, 0 warn, 1 fail, 15 skip
"""


def test_off_aarch64_the_skipped_checks_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2\n")
    console = Console(record=True, width=120, no_color=True, highlight=False)
    assert doctor(["--root", str(tmp_path)], env={}, console=console) == 1
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
    assert text == OFF_AARCH64_TRANSCRIPT


@pytest.mark.skipif(platform.machine() == "aarch64", reason="shows the live report off aarch64")
def test_off_aarch64_live_the_sentence_is_said_once() -> None:
    status, text = run(doctor, [])
    assert text.count("runs on aarch64 only") == 1
    assert status == 1


def _cpuinfo_case(root: Path, case: str) -> Path:
    cpuinfo = root / "proc" / "cpuinfo"
    cpuinfo.parent.mkdir(parents=True)
    if case == "empty":
        cpuinfo.write_text("")
    elif case == "blank":
        cpuinfo.write_text("\n  \n\n")
    elif case == "garbage":
        cpuinfo.write_bytes(b"\x7fELF\x02\x01\x01\x00 not a cpuinfo \xff\xfe\n")
    elif case == "html":  # a download that saved an error page
        cpuinfo.write_text("<html><body>404: Not Found</body></html>\n")
    elif case == "unreadable":  # readable only as EIO, whoever runs the test (root reads any mode 000 file)
        cpuinfo.symlink_to("/proc/self/mem")
    elif case == "folder":
        cpuinfo.mkdir()
    return cpuinfo


CPUINFO_PROBLEMS = {
    "empty": "is empty",
    "blank": "is empty",
    "garbage": "holds no 'processor : N' block, so it is not a copy of /proc/cpuinfo",
    "html": "holds no 'processor : N' block, so it is not a copy of /proc/cpuinfo",
    "unreadable": "cannot be read (Input/output error)",
    "folder": "is a folder, not a copy of /proc/cpuinfo",
}


@pytest.mark.parametrize("case", sorted(CPUINFO_PROBLEMS))
def test_a_bad_cpuinfo_is_named_as_the_problem(case: str, tmp_path: Path, capsys) -> None:
    cpuinfo = _cpuinfo_case(tmp_path, case)
    for argv in (["--root", str(tmp_path)], ["--root", str(tmp_path), "--env"]):
        assert doctor(argv) == 2
        assert capsys.readouterr().err == (
            f"flagtree-doctor: error: --root {tmp_path}: {cpuinfo} {CPUINFO_PROBLEMS[case]} (fix: copy the "
            f"machine's /proc/cpuinfo to {cpuinfo} (the feedstock's docs/using.md, 'Recording a machine', lists "
            "every file the doctor reads))\n"
        )


def _special_files(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a FIFO, a socket and a symlink to /dev/zero where files of the recorded ``tree`` belong."""
    import socket  # noqa: PLC0415

    cpu = tree / "sys" / "devices" / "system" / "cpu"
    fifo = cpu / "cpu4" / "cpufreq" / "scaling_governor"  # a big core's: the governor check reads it
    fifo.unlink()
    os.mkfifo(fifo)
    capacity = cpu / "cpu0" / "cpu_capacity"
    capacity.unlink()
    monkeypatch.chdir(capacity.parent)  # a socket's path must be short (108 bytes): bound by its name
    with socket.socket(socket.AF_UNIX) as unix:
        unix.bind(capacity.name)
    vector_length = tree / "proc" / "sys" / "abi" / "sve_default_vector_length"
    vector_length.unlink()
    vector_length.symlink_to("/dev/zero")


def test_special_files_in_a_recorded_tree_are_unreadable_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO (no writer ever comes), a socket and /dev/zero (no end): each is a file the doctor cannot read,
    as one without read permission: the checks judge without it, and the doctor ends at once."""
    tree = tmp_path / "tree"
    shutil.copytree(DATA / "cix-p1-orion-o6", tree)
    _special_files(tree, monkeypatch)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "flagtree-doctor"), "--root", str(tree), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=seconds(60),  # a FIFO read blocks for ever: the test ends here
        # /dev/zero read whole fills the memory: at 2 GiB, not the machine's, it ends in a MemoryError.
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)),
    )
    assert done.returncode == 0, done.stderr
    checks = {c["id"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["sve-vector-length"]["message"] == (
        "SVE vector length unknown, so the baseline runtime is used; the Armv9 one assumes 128 bits"
    )
    # CPU 4's governor cannot be read; the other big cores' still can.
    assert checks["cpufreq-governor"]["message"] == "governor schedutil on CPUs 5-11; clocks ramp up late"
    assert checks["core-types"]["status"] == "warn"  # big.LITTLE still told apart, by core type


@pytest.mark.parametrize("where", ["proc/cpuinfo", "sys/devices/system/cpu/cpu4/cpufreq/scaling_governor"])
def test_a_huge_file_in_a_recorded_tree_is_never_read_whole(tmp_path: Path, where: str) -> None:
    """A sparse file of 1 GiB in the tree: cpuinfo, which --root needs, is refused in one line; any other
    file is one the doctor cannot read (as a FIFO is). Neither is read whole: the command's own peak memory
    stays far below the file's size."""
    tree = tmp_path / "tree"
    shutil.copytree(DATA / "cix-p1-orion-o6", tree)
    huge = tree / where
    with huge.open("r+b") as stream:
        stream.truncate(1 << 30)  # its text first, then nothing
    done = run_measured(["flagtree-doctor", "--root", str(tree), "--json"], tmp_path / "peak")
    assert 0 < done.peak_kib < MEMORY_LIMIT_KIB, f"{done.peak_kib} kB"
    assert "Traceback" not in done.stderr
    if where == "proc/cpuinfo":
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines()[-1] == (
            f"flagtree-doctor: error: --root {tree}: {huge} is longer than {MAX_FILE} bytes, more than any file "
            "of its kind, not a copy of /proc/cpuinfo (fix: copy the machine's /proc/cpuinfo to "
            f"{huge} (the feedstock's docs/using.md, 'Recording a machine', lists every file the doctor reads))"
        )
    else:
        assert done.returncode == 0, done.stderr
        checks = {c["id"]: c for c in json.loads(done.stdout)["checks"]}
        assert checks["cpufreq-governor"]["message"] == "governor schedutil on CPUs 5-11; clocks ramp up late"
