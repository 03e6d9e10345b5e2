"""Every command on the terminals real runs meet, through the real console scripts (issue 23 item 6).

- A stdout that cannot hold a character (``PYTHONIOENCODING=ascii``, a Latin-1 pipe; ``LC_ALL=C`` beside it) and
  a path with Chinese and accented letters: the command finishes, writes the path with backslash escapes and
  exits as it would on UTF-8; JSON stays valid JSON; an error is still one line.
- A pipe (the tests' stdout is one) with ``COLUMNS`` set narrow: nothing is hard-wrapped, so each URL, build
  string, message and patch name stays whole on one line (the bump's are in tests/test_bump.py).
- A real terminal (a pty that says nothing of its size, as a container's does) and a pipe, under any ``COLUMNS``
  (0, negative, huge, not a number), ``LINES``, ``TERM`` (dumb, unset, unknown) and ``NO_COLOR`` (issue 29
  item 5): every line the command writes in a plain pipe is there, word for word, and nothing is cut short.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import termios
from pathlib import Path

import pytest
import yaml

from _doctor_machine import as_this_machine
from _stub_channel import write_package
from _timing import seconds
from _tools import TORCH_INSTALL, aarch64_gcc, require_module

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CIX = ROOT / "tests" / "data" / "doctor" / "cix-p1-orion-o6"
ODD = "通道 ü"  # a folder name no ASCII stream can hold, with a space
ESCAPED = {"ascii": "\\u901a\\u9053 \\xfc", "latin-1": "\\u901a\\u9053 \u00fc"}
LLVM_COMMIT = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())["llvm_commit"][0]
TOP = f"llvm-{LLVM_COMMIT[:8]}-ubuntu-arm64"
ARCHIVE_URL = f"https://oaitriton.blob.core.windows.net/public/llvm-builds/{TOP}.tar.gz"


def run(
    argv: list[str], tmp_path: Path, *, encoding: str = "utf-8", env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """A console script of this venv, its stdout and stderr decoded as ``encoding`` (strictly: a character
    the stream could not hold would fail here)."""
    full_env = {
        **os.environ,
        "PYTHONIOENCODING": encoding,
        "LC_ALL": "C",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "COLUMNS": "40",  # a pipe ignores it; a terminal this narrow would wrap everything
        **(env or {}),
    }
    done = _console_script(argv, full_env)
    return done.returncode, done.stdout.decode(encoding), done.stderr.decode(encoding)


def _console_script(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """``argv`` (its first word a console script of this environment) run from the repository, its output kept."""
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        capture_output=True,
        env=env,
        cwd=ROOT,
        check=False,
        timeout=seconds(600),
    )


def no_traceback(out: str, err: str) -> None:
    assert "Traceback" not in out + err and "Error:" not in err, out + err


@pytest.fixture
def odd(tmp_path: Path) -> Path:
    folder = tmp_path / ODD
    folder.mkdir()
    return folder


@pytest.fixture
def channel(odd: Path) -> Path:
    """A channel folder under the odd name holding one package."""
    write_package(odd / "channel" / "noarch" / "stub-1.0-h0_0.tar.bz2", "stub", "1.0", "h0_0", "noarch")
    return odd / "channel"


ENCODINGS = pytest.mark.parametrize("encoding", ["ascii", "latin-1"])


@ENCODINGS
def test_channel_index_and_install(channel: Path, tmp_path: Path, encoding: str) -> None:
    status, out, err = run(
        ["flagtree-feedstock", "channel", "index", str(channel)], tmp_path, encoding=encoding
    )
    no_traceback(out, err)
    assert status == 0
    escaped = str(channel).replace(ODD, ESCAPED[encoding])
    assert out == f"indexed {escaped}/noarch/repodata.json\n"
    prefix = channel.parent / "前缀"
    argv = ["flagtree-feedstock", "channel", "install", str(channel), "stub", "--prefix", str(prefix)]
    status, out, err = run(argv, tmp_path, encoding=encoding)
    no_traceback(out, err)
    assert status == 0
    assert f"installed from {escaped}" in out
    assert (prefix / "conda-meta").is_dir()


@pytest.fixture
def archive(odd: Path) -> Path:
    """A stand-in of Triton's LLVM archive (its tools: an aarch64 program) under the odd folder."""
    (odd / "tool.c").write_text('#include <stdio.h>\nint main(void) { return puts("stand-in") < 0; }\n')
    subprocess.run([aarch64_gcc(), str(odd / "tool.c"), "-o", str(odd / "tool")], check=True)
    tree = odd / "tree" / TOP
    (tree / "bin").mkdir(parents=True)
    for tool in ("mlir-tblgen", "llvm-tblgen"):
        shutil.copy2(odd / "tool", tree / "bin" / tool)
    (tree / "lib").mkdir()
    (tree / "lib" / "libLLVMSupport.a").write_bytes(b"!<arch>\n")
    path = odd / f"{TOP}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(tree, arcname=TOP)
    return path


@ENCODINGS
def test_render_with_an_llvm_archive(archive: Path, odd: Path, tmp_path: Path, encoding: str) -> None:
    # Its programs need GLIBC_2.34 (built against Debian's glibc): the floor raised in a variant file.
    variants = odd / "glibc.yaml"
    variants.write_text('c_stdlib_version:\n  - "2.34"\n')
    argv = [
        "flagtree-feedstock",
        "build",
        "--render-only",
        "--python",
        "3.12",
        "--variant-config",
        str(variants),
    ]
    status, out, err = run([*argv, "--llvm-archive", str(archive)], tmp_path, encoding=encoding)
    no_traceback(out, err)
    assert status == 0
    escaped = str(archive).replace(ODD, ESCAPED[encoding])
    assert f"\n  {escaped}\n" in out  # under "flagtree-llvm: from Triton's LLVM archive ..."
    assert f"variant_configs: {str(variants).replace(ODD, ESCAPED[encoding])}" in err  # the options summary
    status, out, err = run([*argv, "--json", "--llvm-archive", str(archive)], tmp_path, encoding=encoding)
    assert status == 0
    assert json.loads(out)["llvm_archive"]["origin"] == str(archive)


@ENCODINGS
def test_doctor_apply_and_undo(odd: Path, tmp_path: Path, encoding: str) -> None:
    prefix = odd / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    escaped = str(prefix).replace(ODD, ESCAPED[encoding])
    env = {**as_this_machine(CIX), "CONDA_PREFIX": str(prefix)}
    argv = ["flagtree-doctor", "--apply"]
    status, out, err = run(argv, tmp_path, encoding=encoding, env=env)
    no_traceback(out, err)
    assert status == 0
    assert f"wrote {escaped}/etc/conda/activate.d/flagtree-doctor-openmp.sh\n" in out
    status, out, err = run([*argv, "--undo"], tmp_path, encoding=encoding, env=env)
    no_traceback(out, err)
    assert status == 0
    assert f"removed {escaped}/etc/conda/activate.d/flagtree-doctor-openmp.sh\n" in out
    assert not (prefix / "etc").exists()


@ENCODINGS
def test_doctor_json_and_report_of_a_tree_under_an_odd_name(odd: Path, tmp_path: Path, encoding: str) -> None:
    tree = odd / "machine"
    shutil.copytree(CIX, tree)
    status, out, err = run(["flagtree-doctor", "--root", str(tree), "--json"], tmp_path, encoding=encoding)
    assert status == 0, err
    assert json.loads(out)["root"] == str(tree)
    status, out, err = run(["flagtree-doctor", "--root", str(tree)], tmp_path, encoding=encoding)
    no_traceback(out, err)
    assert status == 0
    assert f"(from {str(tree).replace(ODD, ESCAPED[encoding])}/proc/cpuinfo" in out


@ENCODINGS
def test_an_error_is_still_one_line(odd: Path, tmp_path: Path, encoding: str) -> None:
    missing = odd / "missing"
    for argv, prog, status in (
        (["flagtree-feedstock", "channel", "index", str(missing)], "flagtree-feedstock", 2),
        (["flagtree-doctor", "--root", str(missing)], "flagtree-doctor", 2),
        (["flagtree-doctor", "--root", str(missing), "--json"], "flagtree-doctor", 2),
    ):
        got, out, err = run(argv, tmp_path, encoding=encoding)
        assert got == status, err
        (line,) = err.splitlines()
        assert line.startswith(f"{prog}: error: ") and str(missing).replace(ODD, ESCAPED[encoding]) in line
        if "--json" in argv:
            assert json.loads(out)["error"]["message"] == f"--root {missing} is not a folder"


# ---- a pipe -----------------------------------------------------------------------------------------------------


def test_a_piped_render_keeps_urls_and_build_strings_whole(tmp_path: Path) -> None:
    argv = ["flagtree-feedstock", "build", "--render-only", "--python", "3.12", "--llvm-archive", ARCHIVE_URL]
    status, out, err = run([*argv, "--llvm-archive-sha256", "d" * 64], tmp_path)
    assert status == 0, err
    lines = out.splitlines()
    assert f"  {ARCHIVE_URL}" in lines
    assert f"      {ARCHIVE_URL}" in lines  # the source of flagtree-llvm
    llvm_source = f"https://github.com/llvm/llvm-project/archive/{LLVM_COMMIT}.tar.gz"
    assert f"      {llvm_source}" in lines
    status, json_out, _ = run([*argv, "--llvm-archive-sha256", "d" * 64, "--json"], tmp_path)
    assert status == 0
    for output in json.loads(json_out)["outputs"]:
        assert any(output["name"] in line and output["build_string"] in line for line in lines), output


def test_a_piped_doctor_keeps_each_row_on_one_line(tmp_path: Path) -> None:
    status, out, err = run(["flagtree-doctor", "--root", str(CIX)], tmp_path)
    assert status == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith("core-types")]
    assert (
        "big.LITTLE (core types): big Cortex-A720 on CPUs 4-11, little Cortex-A520 on CPUs 0-3; threads on "
        "little cores slow every kernel" in row
    )
    assert row.rstrip().endswith("OMP_NUM_THREADS=8 taskset -c 4-11 python ...")


def test_a_piped_verify_keeps_each_row_on_one_line(tmp_path: Path) -> None:
    """A stand-in ``triton`` with nothing in it: the install checks fail, and the table says why."""
    require_module("torch", TORCH_INSTALL)
    (tmp_path / "fake" / "triton").mkdir(parents=True)
    (tmp_path / "fake" / "triton" / "__init__.py").write_text("")
    status, out, err = run(["flagtree-verify"], tmp_path, env={"PYTHONPATH": str(tmp_path / "fake")})
    assert status == 1, err
    (row,) = [line for line in out.splitlines() if line.startswith("cpu-backend")]
    assert row.rstrip().endswith("ModuleNotFoundError: No module named 'triton.backends'")
    (tolerances,) = [line for line in out.splitlines() if line.startswith("tolerances: ")]
    assert tolerances.endswith("float32 rtol=1e-05, atol=1e-06 (fp32 reassociation)")


# ---- any COLUMNS, LINES, TERM and NO_COLOR, on a terminal and in a pipe --------------------------------------------

# Each case: variables set (None: unset) on top of the tests' own (conftest sets NO_COLOR and COLUMNS).
SURROUNDINGS = {
    "columns-0": {"COLUMNS": "0"},
    "columns-negative": {"COLUMNS": "-3"},
    "columns-not-a-number": {"COLUMNS": "abc"},
    "columns-1": {"COLUMNS": "1"},
    "columns-huge": {"COLUMNS": "99999999999999999999"},
    "nothing-set": {"COLUMNS": None, "LINES": None, "TERM": None, "NO_COLOR": None},
    "term-dumb": {"TERM": "dumb", "COLUMNS": "0", "LINES": "0"},
    "term-unknown": {"TERM": "garbage-terminal", "LINES": "-1", "NO_COLOR": None},
    "dumb-forced-colour": {"TERM": "dumb", "FORCE_COLOR": "1", "COLUMNS": None},
}
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


def surroundings(case: str) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "")}
    for name, value in SURROUNDINGS[case].items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return {name: value for name, value in env.items() if value}


def on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """A console script of this venv with stdin, stdout and stderr on a new pty whose size is unset (0 by 0, as
    in a container): its status and what it wrote, escape sequences taken out."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    with subprocess.Popen(
        [str(BIN / argv[0]), *argv[1:]], stdin=follower, stdout=follower, stderr=follower, env=env, cwd=ROOT
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # EIO: the command has ended and closed the pty
                break
            if not chunk:
                break
            chunks.append(chunk)
        status = process.wait(timeout=seconds(600))
    os.close(leader)
    return status, ESCAPE.sub("", b"".join(chunks).decode().replace("\r\n", "\n"))


def in_a_pipe(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = _console_script(argv, env)
    return done.returncode, ESCAPE.sub("", (done.stdout + done.stderr).decode())


def letters(text: str) -> str:
    """``text`` without white space: what is left of a line however a terminal's width broke it."""
    return "".join(text.split())


WHERE = pytest.mark.parametrize("where", [on_a_terminal, in_a_pipe], ids=["terminal", "pipe"])


@WHERE
@pytest.mark.parametrize("case", SURROUNDINGS)
def test_the_doctor_report_never_vanishes(case: str, where: object) -> None:
    """Every character of each line around the table, in order (a terminal may break it), each check named in full, nothing cut
    short with an ellipsis, whatever the variables say."""
    argv = ["flagtree-doctor", "--root", str(CIX)]
    status, reference = in_a_pipe(argv, surroundings("nothing-set"))
    assert status == 0, reference
    assert callable(where)
    status, out = where(argv, surroundings(case))
    assert status == 0, out
    lines = reference.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("check ")))
    table = [line.split()[0] for line in lines[header + 2 :] if not line.startswith(("skipped", "3 ok"))]
    assert table[:2] == ["cpu-features", "sve-vector-length"], reference  # the check ids of the rows
    for line in lines[:header] + [line for line in lines if line.startswith(("skipped", "3 ok"))]:
        assert letters(line) in letters(out), (line, out)
    for check in table:
        assert re.search(rf"^{re.escape(check)}\b", out, re.MULTILINE), (check, out)
    assert "\u2026" not in out, out
    if where is in_a_pipe:  # a pipe is never wrapped: each line as in the reference
        assert [line.rstrip() for line in out.splitlines()] == [line.rstrip() for line in lines]


@WHERE
@pytest.mark.parametrize("case", SURROUNDINGS)
def test_the_toolkits_lines_never_vanish(case: str, where: object, tmp_path: Path) -> None:
    folder = tmp_path / ("a-channel-folder-with-a-name-longer-than-any-narrow-terminal" * 2)
    write_package(folder / "noarch" / "stub-1.0-h0_0.tar.bz2", "stub", "1.0", "h0_0", "noarch")
    assert callable(where)
    status, out = where(["flagtree-feedstock", "channel", "index", str(folder)], surroundings(case))
    assert status == 0, out
    assert letters(out) == letters(f"indexed {folder}/noarch/repodata.json"), out


@pytest.mark.parametrize("case", ["columns-0", "columns-1", "term-dumb", "dumb-forced-colour"])
def test_a_render_on_a_terminal_never_vanishes(case: str) -> None:
    """The render's options summary (stderr) and its list of sources (stdout), every character of them."""
    argv = ["flagtree-feedstock", "build", "--render-only", "--python", "3.12"]
    status, reference = in_a_pipe(argv, surroundings("nothing-set"))
    assert status == 0, reference
    status, out = on_a_terminal(argv, surroundings(case))
    assert status == 0, out
    summary = [
        line for line in reference.splitlines() if line.startswith(("flagtree-feedstock ", "   ", " * "))
    ]
    sources = reference[reference.index("sources (") :].splitlines()
    assert len(summary) > 5 and len(sources) > 5, reference
    for line in summary + sources:
        assert letters(line) in letters(out), (line, out)
