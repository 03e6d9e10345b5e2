"""The stdlib ELF reader and the GLIBC/GLIBCXX checks, on shared objects built here with gcc."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from _tools import aarch64_gcc, require_executable
from flagtree_doctor import elf
from flagtree_doctor.cli import main
from flagtree_doctor.glibc import loaded_libraries, resolve_library
from flagtree_doctor.model import System

SITE = "opt/conda/lib/python3.11/site-packages/triton"
DATA = Path(__file__).parent / "data" / "doctor"
HOST_LIBC = next(
    (
        p
        for p in (Path("/lib/x86_64-linux-gnu/libc.so.6"), Path("/lib/aarch64-linux-gnu/libc.so.6"))
        if p.exists()
    ),
    None,
)
TRIPLET = HOST_LIBC.parent.name if HOST_LIBC else ""


def cc(*args: str | Path, compiler: str | None = None) -> None:
    compiler = compiler or require_executable("gcc", "gcc")
    subprocess.run([compiler, *map(str, args)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A fake libstdc++ in a new (GLIBCXX_3.4.99) and an old (GLIBCXX_3.4) flavour, and a user of it."""
    work = tmp_path_factory.mktemp("elf")
    (work / "std.c").write_text("int fake_old(void) { return 0; }\nint fake_new(void) { return 1; }\n")
    (work / "new.map").write_text(
        "GLIBCXX_3.4 { global: fake_old; local: *; };\nGLIBCXX_3.4.99 { global: fake_new; } GLIBCXX_3.4;\n"
    )
    (work / "old.map").write_text("GLIBCXX_3.4 { global: fake_old; local: *; };\n")
    for flavour in ("new", "old"):
        (work / flavour).mkdir()
        cc("-shared", "-fPIC", "-Wl,-soname,libstdc++.so.6", f"-Wl,--version-script={work}/{flavour}.map",
           work / "std.c", "-o", work / flavour / "libstdc++.so.6")  # fmt: skip
    (work / "user.c").write_text(
        '#include <stdio.h>\nextern int fake_new(void);\nint use(void) { puts("x"); return fake_new(); }\n'
    )
    cc("-shared", "-fPIC", work / "user.c", f"-L{work}/new", "-l:libstdc++.so.6", "-o", work / "libtriton.so")
    cc("-shared", "-fPIC", work / "user.c", f"-L{work}/new", "-l:libstdc++.so.6", "-Wl,-rpath,$ORIGIN/../../../..",
       "-o", work / "libtriton-runpath.so")  # fmt: skip
    return {"work": work, "user": work / "libtriton.so", "runpath": work / "libtriton-runpath.so"}


def readelf_needs(path: Path) -> dict[str, set[str]]:
    """`readelf -V`'s "Version needs" section, as {file: {names}}."""
    readelf = require_executable("readelf", "binutils")
    text = subprocess.run([readelf, "-V", str(path)], capture_output=True, text=True, check=True).stdout
    needs: dict[str, set[str]] = {}
    current = None
    for line in text.split("Version needs section")[1].splitlines():
        if match := re.search(r"File: (\S+)", line):
            current = needs.setdefault(match.group(1), set())
        elif (match := re.search(r"Name: (\S+)", line)) and current is not None:
            current.add(match.group(1))
    return needs


def test_version_needs_match_readelf(built: dict[str, Path]) -> None:
    needs = elf.version_needs(built["user"])
    assert needs["libstdc++.so.6"] == {"GLIBCXX_3.4.99"}
    assert any(name.startswith("GLIBC_2.") for name in needs["libc.so.6"])
    assert {k: set(v) for k, v in needs.items()} == readelf_needs(built["user"])


def test_definitions_and_dynamic_entries(built: dict[str, Path]) -> None:
    work = built["work"]
    assert elf.version_definitions(work / "new/libstdc++.so.6") == {
        "libstdc++.so.6",
        "GLIBCXX_3.4",
        "GLIBCXX_3.4.99",
    }
    assert elf.version_definitions(work / "old/libstdc++.so.6") == {"libstdc++.so.6", "GLIBCXX_3.4"}
    info = elf.dynamic_info(built["runpath"])
    assert "libstdc++.so.6" in info.needed
    assert info.runpath == ("$ORIGIN/../../../..",)
    assert elf.version_key("GLIBCXX_3.4.30") == (3, 4, 30)
    assert elf.version_key("GLIBC_PRIVATE") == ()
    with pytest.raises(elf.ElfError):
        elf.version_needs(work / "std.c")


@pytest.mark.skipif(HOST_LIBC is None, reason="needs a Debian-style multiarch libc")
def test_real_libc_defines_what_the_test_library_needs(built: dict[str, Path]) -> None:
    assert HOST_LIBC is not None
    defined = elf.version_definitions(HOST_LIBC)
    assert elf.version_needs(built["user"])["libc.so.6"] <= defined


def make_root(root: Path, built: dict[str, Path], *, binary: str, libstdcxx: str, where: str) -> Path:
    assert HOST_LIBC is not None
    (root / SITE / "_C").mkdir(parents=True)
    (root / "proc").mkdir()
    shutil.copyfile(DATA / "neoverse-n2/proc/cpuinfo", root / "proc/cpuinfo")  # an aarch64 machine's
    shutil.copy(built[binary], root / SITE / "_C/libtriton.so")
    (root / f"lib/{TRIPLET}").mkdir(parents=True)
    shutil.copy(HOST_LIBC, root / f"lib/{TRIPLET}/libc.so.6")
    (root / where).mkdir(parents=True, exist_ok=True)
    shutil.copy(built["work"] / libstdcxx / "libstdc++.so.6", root / where / "libstdc++.so.6")
    return root


RULE = "─" * 160
GLIBCXX_TRANSCRIPT = f"""\
check     status   message                                                                 fix
{RULE}
glibcxx   fail     libtriton.so needs GLIBCXX_3.4.99 from /opt/old/libstdc++.so.6, which   conda install -c conda-forge libstdcxx-ng libgcc-ng, and keep older
                   has up to GLIBCXX_3.4                                                   libstdc++ folders off LD_LIBRARY_PATH (or import triton before other
                                                                                           C++ extensions)
0 ok, 0 warn, 1 fail, 0 skip
"""


@pytest.mark.skipif(HOST_LIBC is None, reason="needs a Debian-style multiarch libc")
def test_old_libstdcxx_fails_with_the_exact_report(
    tmp_path: Path, built: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_root(tmp_path, built, binary="user", libstdcxx="old", where="opt/old")
    monkeypatch.setenv("NO_COLOR", "1")
    console = Console(record=True, width=160, highlight=False, force_terminal=False)
    assert main(["--root", str(root), "glibcxx"], env={"LD_LIBRARY_PATH": "/opt/old"}, console=console) == 1
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
    assert text == GLIBCXX_TRANSCRIPT

    console = Console(record=True, width=300)
    assert main(["--root", str(root), "--json", "glibc"], env={}, console=console) == 0
    (check,) = json.loads(console.export_text())["checks"]
    assert check["status"] == "ok"
    assert check["message"].startswith("libc.so.6 GLIBC_2.")


@pytest.mark.skipif(HOST_LIBC is None, reason="needs a Debian-style multiarch libc")
def test_runpath_and_library_path_find_the_newer_copy(tmp_path: Path, built: dict[str, Path]) -> None:
    # $ORIGIN/../../../.. from opt/conda/lib/python3.11/site-packages/triton/_C is opt/conda/lib.
    root = make_root(tmp_path / "a", built, binary="runpath", libstdcxx="new", where="opt/conda/lib")
    shutil.copy(built["work"] / "old/libstdc++.so.6", root / f"lib/{TRIPLET}/libstdc++.so.6")
    console = Console(record=True, width=300)
    assert main(["--root", str(root), "--json", "glibcxx"], env={}, console=console) == 0
    assert (
        json.loads(console.export_text())["checks"][0]["message"]
        == "libstdc++.so.6 GLIBCXX_3.4.99 <= GLIBCXX_3.4.99"
    )

    root = make_root(tmp_path / "b", built, binary="user", libstdcxx="new", where="opt/newer")
    shutil.copy(built["work"] / "old/libstdc++.so.6", root / f"lib/{TRIPLET}/libstdc++.so.6")
    env = {"LD_LIBRARY_PATH": "/opt/newer"}
    assert main(["--root", str(root), "glibcxx"], env=env, console=Console(record=True)) == 0
    assert main(["--root", str(root), "glibcxx"], env={}, console=Console(record=True)) == 1


def test_live_process_reuses_its_loaded_libc(built: dict[str, Path]) -> None:
    system = System.from_root(None, {})
    loaded = loaded_libraries(system)
    found = resolve_library(system, "libc.so.6", built["user"], elf.dynamic_info(built["user"]), loaded)
    assert found is not None
    assert found in loaded


def test_cross_built_aarch64_library(tmp_path: Path) -> None:
    source = tmp_path / "k.c"
    source.write_text(
        '#include <math.h>\n#include <stdio.h>\ndouble f(double x) { puts("k"); return exp(x); }\n'
    )
    cc("-shared", "-fPIC", source, "-lm", "-o", tmp_path / "k.so", compiler=aarch64_gcc())
    info = elf.dynamic_info(tmp_path / "k.so")
    assert info.machine == elf.EM_AARCH64
    assert {"libc.so.6", "libm.so.6"} <= set(info.needed)
    needs = elf.version_needs(tmp_path / "k.so")
    assert "GLIBC_2.17" in needs["libc.so.6"]  # the first aarch64 glibc
    assert {k: set(v) for k, v in needs.items()} == readelf_needs(tmp_path / "k.so")


@pytest.fixture(scope="module")
def versioned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """libstdc++ stand-ins whose versions order otherwise as strings ("GLIBCXX_3.4.19" < "GLIBCXX_3.4.9"):
    ``full`` defines GLIBCXX_3.4, 3.4.9, 3.4.19 and 3.4.30; ``nineteen`` stops at 3.4.19; ``gap`` lacks 3.4.9
    too. Two users: ``old`` needs 3.4.9 and 3.4.19, ``new`` needs 3.4.9 and 3.4.30."""
    work = tmp_path_factory.mktemp("versioned")
    functions = {"3.4.9": "fake_9", "3.4.19": "fake_19", "3.4.30": "fake_30"}
    (work / "std.c").write_text(
        "".join(f"int {f}(void) {{ return 0; }}\n" for f in ("fake_old", *functions.values()))
    )
    flavours = {"full": ("3.4.9", "3.4.19", "3.4.30"), "nineteen": ("3.4.9", "3.4.19"), "gap": ("3.4.19",)}
    for flavour, versions in flavours.items():
        nodes, parent = ["GLIBCXX_3.4 { global: fake_old; local: *; };"], "GLIBCXX_3.4"
        hidden = [functions[v] for v in functions if v not in versions]
        for version in versions:
            exported = [functions[version], *(hidden if version == versions[0] else ())]
            nodes.append(f"GLIBCXX_{version} {{ global: {'; '.join(exported)}; }} {parent};")
            parent = f"GLIBCXX_{version}"
        (work / f"{flavour}.map").write_text("\n".join(nodes) + "\n")
        (work / flavour).mkdir()
        cc("-shared", "-fPIC", "-Wl,-soname,libstdc++.so.6", f"-Wl,--version-script={work}/{flavour}.map",
           work / "std.c", "-o", work / flavour / "libstdc++.so.6")  # fmt: skip
    made = {"work": work}
    for user, calls in {"old": ("fake_9", "fake_19"), "new": ("fake_9", "fake_30")}.items():
        source = work / f"{user}.c"
        source.write_text(
            "".join(f"extern int {f}(void);\n" for f in calls)
            + f"int use(void) {{ return {' + '.join(f'{f}()' for f in calls)}; }}\n"
        )
        made[user] = work / f"lib{user}.so"
        cc("-shared", "-fPIC", source, f"-L{work}/full", "-l:libstdc++.so.6", "-o", made[user])
    return made


@pytest.mark.skipif(HOST_LIBC is None, reason="needs a Debian-style multiarch libc")
@pytest.mark.parametrize(
    ("user", "library", "expected"),
    [
        ("old", "nineteen", ("ok", "libstdc++.so.6 GLIBCXX_3.4.19 <= GLIBCXX_3.4.19")),
        (
            "new",
            "nineteen",
            (
                "fail",
                "libtriton.so needs GLIBCXX_3.4.30 from /opt/old/libstdc++.so.6, which has up to GLIBCXX_3.4.19",
            ),
        ),
        (
            "new",
            "gap",
            (
                "fail",
                (
                    "libtriton.so needs GLIBCXX_3.4.9, GLIBCXX_3.4.30 from /opt/old/libstdc++.so.6, which has up to "
                    "GLIBCXX_3.4.19"
                ),
            ),
        ),
    ],
    ids=["newest-needed-and-provided", "newest-provided", "missing-in-order"],
)
def test_glibcxx_versions_are_ordered_as_versions(
    tmp_path: Path, versioned: dict[str, Path], user: str, library: str, expected: tuple[str, str]
) -> None:
    assert (
        elf.version_needs(versioned[user])["libstdc++.so.6"]
        == {
            "old": {"GLIBCXX_3.4.9", "GLIBCXX_3.4.19"},
            "new": {"GLIBCXX_3.4.9", "GLIBCXX_3.4.30"},
        }[user]
    )
    root = make_root(tmp_path, versioned, binary=user, libstdcxx=library, where="opt/old")
    console = Console(record=True, width=400)
    assert main(
        ["--root", str(root), "--json", "glibcxx"], env={"LD_LIBRARY_PATH": "/opt/old"}, console=console
    ) in (0, 1)
    (check,) = json.loads(console.export_text())["checks"]
    assert (check["status"], check["message"]) == expected
