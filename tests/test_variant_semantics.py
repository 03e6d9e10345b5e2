"""conda-build's variant semantics, one variant (one build string) whatever the route, and variant files
bounded before anything reads them (issue 29 items 1 and 2, issue 28 item 7).

Every case runs the console script, ``flagtree-feedstock build --render-only``, from the repository's root,
where the root ``conda_build_config.yaml`` and ``recipe/`` are found by default.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _recipe_support import ROOT, SHARED, VARIANT_FILES
from _timing import cost_after_signal, seconds
from _toy import error_line
from flagtree_feedstock._own_files import VARIANT
from flagtree_feedstock.recipe.render import MAX_VARIANTS
from flagtree_feedstock.recipe.variants import MAX_VALUE_CHARS, MAX_VARIANT_DEPTH

MAX_VARIANT_FILE_BYTES = VARIANT.limit

GLOBAL, OWN = VARIANT_FILES
# conda-forge's global pinning, kept beside the repository (never in it); a scratch copy of the repository (the
# mutation runner's) finds it at its usual place.
PINNING = next(
    (p for p in (SHARED / "data" / "conda-forge-pinning.yaml", Path("/work/shared/data/conda-forge-pinning.yaml"))
     if p.is_file()),
    SHARED / "data" / "conda-forge-pinning.yaml",
)  # fmt: skip
SCRIPT = str(Path(sys.executable).with_name("flagtree-feedstock"))


def _run(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [SCRIPT, "build", "--render-only", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        stdin=stdin,
        timeout=seconds(120),
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _outputs(*args: str) -> list[dict]:
    done = _run("--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["outputs"]


def _fails(*args: str, status: int = 2) -> str:
    done = _run(*args)
    assert done.returncode == status, done.stderr
    return error_line(done.stderr)


def _build_strings(outputs: list[dict], python: str) -> dict[str, str]:
    """Each output's build string in the variant of ``python`` (outputs without python: their only one)."""
    strings: dict[str, set[str]] = {}
    for o in outputs:
        if o["python"] in (python, None):
            strings.setdefault(o["name"], set()).add(o["build_string"])
    assert all(len(s) == 1 for s in strings.values()), strings
    return {name: s.pop() for name, s in strings.items()}


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---- one variant, one build string (issue 29 item 1) ---------------------------------------------------------


def test_every_route_to_python_3_12_renders_the_same_build_strings(tmp_path: Path) -> None:
    py312 = _file(tmp_path, "py312.yaml", 'python: ["3.12"]\n')  # the example of --help
    routes = {
        "defaults": (),
        "--python": ("--python", "3.12"),
        "-m": ("-m", str(py312)),
        "-e and -m": ("-e", str(GLOBAL), "-m", str(py312)),
        "-m and --python": ("-m", str(py312), "--python", "3.12"),
    }
    if PINNING.is_file():
        routes["-e conda-forge's pinning, -m"] = ("-e", str(PINNING), "-m", str(py312))
    strings = {route: _build_strings(_outputs(*args), "3.12") for route, args in routes.items()}
    assert strings["defaults"]["flagtree-cpu"].startswith("py312h")
    for route, found in strings.items():
        assert found == strings["defaults"], route


# ---- -e and -m as conda-build reads them (issue 29 item 2) ---------------------------------------------------


def test_e_repeats_in_order_before_the_recipe_folder_file(tmp_path: Path) -> None:
    only_python = _file(tmp_path, "python.yaml", 'python: ["3.11"]\n')
    # The second -e adds over the first (before, it replaced it and python_min went missing) ...
    outputs = _outputs("-e", str(GLOBAL), "-e", str(only_python))
    assert {o["python"] for o in outputs if o["name"] == "flagtree-cpu"} == {"3.11"}
    # ... and the recipe folder's own file still wins over every -e.
    compilers = _file(
        tmp_path, "compilers.yaml", 'c_compiler_version: ["12"]\ncxx_compiler_version: ["12"]\n'
    )
    outputs = _outputs("-e", str(GLOBAL), "-e", str(compilers))
    assert {o["variant"].get("c_compiler_version") for o in outputs} - {None} == {"13"}


def test_a_file_given_twice_counts_at_its_last_place(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.yaml", 'python: ["3.11"]\n')
    b = _file(tmp_path, "b.yaml", 'python: ["3.13"]\n')
    outputs = _outputs("-m", str(a), "-m", str(b), "-m", str(a))
    assert {o["python"] for o in outputs if o["name"] == "flagtree-cpu"} == {"3.11"}
    outputs = _outputs("-m", str(b), "-m", str(a), "-m", str(b))
    assert {o["python"] for o in outputs if o["name"] == "flagtree-cpu"} == {"3.13"}


@pytest.mark.skipif(not PINNING.is_file(), reason=f"conda-forge's pinning file is not at {PINNING}")
def test_conda_forges_pinning_as_e_is_read_and_its_other_keys_noted_once() -> None:
    done = _run("-e", str(PINNING))
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("ignored ")]
    assert len(notes) == 1, done.stderr
    assert notes[0].startswith("ignored 494 variant key(s) the recipes do not use (")
    assert notes[0].endswith("--strict refuses them")
    line = _fails("-e", str(PINNING), "--strict")
    assert f"{PINNING}:" in line
    assert "unknown variant key" in line


def _pinning_shaped(tmp_path: Path) -> Path:
    """A small file shaped like conda-forge's pinning: the repository's root keys, and conda-forge's own
    gxx_compiler and gxx_compiler_version, a letter from the cxx_compiler keys the recipes use."""
    extra = 'gxx_compiler:\n  - gxx\ngxx_compiler_version:\n  - "14"\n'
    return _file(tmp_path, "pinning.yaml", GLOBAL.read_text() + extra)


def _hints(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    (note,) = [line for line in done.stderr.splitlines() if line.startswith("ignored ")]
    return [part.strip() for part in note.split(";") if "did you mean" in part]


def test_keys_of_the_pinning_given_with_e_are_known_keys(tmp_path: Path) -> None:
    """conda-forge's gxx_compiler is its own key, not a misspelt cxx_compiler: given with -e it is ignored
    without a hint; the same keys in a -m file are hinted at, and --strict names no key meant for them."""
    pinning = _pinning_shaped(tmp_path)
    assert _hints(_run("-e", str(pinning))) == []
    added = _file(tmp_path, "added.yaml", 'gxx_compiler:\n  - gxx\ngxx_compiler_version:\n  - "14"\n')
    assert _hints(_run("-m", str(added))) == [
        "gxx_compiler: did you mean cxx_compiler?",
        "gxx_compiler_version: did you mean cxx_compiler_version?",
    ]
    assert _hints(_run("-e", str(pinning), "-m", str(added))) == []
    line = _fails("-e", str(pinning), "--strict")
    assert "unknown variant key gxx_compiler" in line
    assert "did you mean" not in line


@pytest.mark.skipif(not PINNING.is_file(), reason=f"conda-forge's pinning file is not at {PINNING}")
def test_conda_forges_own_keys_get_no_hint() -> None:
    assert _hints(_run("-e", str(PINNING))) == []


def test_an_unknown_key_is_a_note_naming_the_key_meant(tmp_path: Path) -> None:
    # An ignored key's value is not judged either: conda-forge's pinning has `cdt_arch: aarch64`, not a list.
    text = 'sleef_comit: ["93f04d869471ce4d007abaebb8c6a7bc62749f61"]\ncdt_arch: aarch64\n'
    typo = _file(tmp_path, "typo.yaml", text)
    done = _run("-m", str(typo))
    assert done.returncode == 0, done.stderr
    assert (
        "ignored 2 variant key(s) the recipes do not use (cdt_arch, sleef_comit); sleef_comit: did you mean "
        "sleef_commit?; --strict refuses them"
    ) in done.stderr


def test_a_flat_zip_keys_list_is_one_group(tmp_path: Path) -> None:
    zipped = _file(
        tmp_path,
        "zipped.yaml",
        "zip_keys:\n  - c_compiler_version\n  - cxx_compiler_version\n"
        'c_compiler_version: ["12", "13"]\ncxx_compiler_version: ["12", "13"]\n',
    )
    outputs = _outputs("-m", str(zipped), "--python", "3.12")
    pairs = {(o["variant"]["c_compiler_version"], o["variant"]["cxx_compiler_version"]) for o in outputs if
             o["name"] == "flagtree-cpu"}  # fmt: skip
    assert pairs == {("12", "12"), ("13", "13")}  # zipped: two variants, not four


def test_a_zip_of_different_lengths_names_the_files_and_keys(tmp_path: Path) -> None:
    zipped = _file(
        tmp_path,
        "zipped.yaml",
        'zip_keys: [[c_compiler_version, cxx_compiler_version]]\nc_compiler_version: ["12", "13"]\n',
    )
    line = _fails("-m", str(zipped))
    assert line.startswith(
        f"flagtree-feedstock: error: the zip_keys group [c_compiler_version, cxx_compiler_version] of {zipped} "
        f"zips lists of different lengths: c_compiler_version has 2 (from {zipped}), cxx_compiler_version has 1 "
        "(from recipe/conda_build_config.yaml) (fix: "
    )
    assert "recipe.yaml" not in line


def test_c_and_cxx_compilers_of_different_versions_warn_or_fail_with_strict(tmp_path: Path) -> None:
    c12 = _file(tmp_path, "c12.yaml", 'c_compiler_version: ["12"]\n')
    done = _run("-m", str(c12), "--python", "3.12")
    assert done.returncode == 0, done.stderr
    warning = (
        f"c_compiler_version 12 (from {c12}) and cxx_compiler_version 13 (from recipe/conda_build_config.yaml) "
        "differ: gcc 12 would build the C code and gxx 13 the C++ code of one package"
    )
    assert [line for line in done.stderr.splitlines() if "differ" in line] == [
        f"{warning} (--strict makes this an error)"
    ]
    assert _fails("-m", str(c12), "--strict") == (
        f"flagtree-feedstock: error: {warning} (fix: set c_compiler_version and cxx_compiler_version alike)"
    )


def test_help_says_where_we_differ_from_conda_build() -> None:
    done = subprocess.run([SCRIPT, "build", "--help"], capture_output=True, text=True, check=True,
                          env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    text = " ".join(done.stdout.split())
    assert "Unlike conda-build, ~/conda_build_config.yaml is never read" in text
    assert "keys the recipes do not use are ignored with a note (an error with --strict)" in text
    assert "a file given twice counts at its last place" in text


# ---- values and files refused before anything reads them (issue 29 item 3, issue 28 item 7) ------------------


def test_a_value_with_a_line_break_is_refused(tmp_path: Path) -> None:
    broken = _file(tmp_path, "broken.yaml", 'flagtree_version: ["0.6\\n0"]\n')
    assert _fails("-m", str(broken)) == (
        f"flagtree-feedstock: error: {broken}:1: flagtree_version entry '0.6\\n0' holds a line break "
        "(fix: write each flagtree_version entry on one line (a YAML | or > block, or \\n in quotes, makes one))"
    )


def test_a_value_too_long_is_refused(tmp_path: Path) -> None:
    long = _file(tmp_path, "long.yaml", f'flagtree_version: ["{"1" * (MAX_VALUE_CHARS + 1)}"]\n')
    assert f"flagtree_version entry is {MAX_VALUE_CHARS + 1} characters long" in _fails("-m", str(long))


def test_special_files_are_refused_by_kind(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, kind in (
        (fifo, "a pipe (FIFO)"),
        (Path("/dev/null"), "a character device"),
        (tmp_path, "a folder"),
    ):
        assert f"variant file {path} is {kind}, not a file" in _fails("-m", str(path))
    done = _run("-m", "/dev/stdin", stdin=subprocess.PIPE)
    assert done.returncode == 2
    assert "variant file /dev/stdin is a pipe (FIFO), not a file" in error_line(done.stderr)


def test_a_nul_byte_deep_nesting_and_a_large_file_are_refused_before_yaml_reads_them(tmp_path: Path) -> None:
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b'python: ["3.12"]\nzlib: ["1\x00"]\n')
    assert _fails("-m", str(nul)) == (
        f"flagtree-feedstock: error: variant file {nul} holds a NUL byte at offset 26 (line 2) "
        "(fix: save nul.yaml as UTF-8 text)"
    )
    deep = _file(tmp_path, "deep.yaml", "zlib: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert f"variant file {deep} is nested deeper than {MAX_VARIANT_DEPTH} levels at line 1" in _fails(
        "-m", str(deep)
    )
    large = _file(tmp_path, "large.yaml", "# padding\n" * (MAX_VARIANT_FILE_BYTES // 10 + 1))
    started = time.monotonic()
    assert f"variant file {large} is larger than {MAX_VARIANT_FILE_BYTES // 1024} KiB" in _fails(
        "-m", str(large)
    )
    assert time.monotonic() - started < seconds(30)  # read up to the cap, never parsed
    huge = tmp_path / "huge.yaml"  # issue 28's 5 MB file: refused by its size, whatever it holds
    huge.write_text("python:\n" + '  - "3.12"\n' * 500_000)
    assert "is larger than" in _fails("-m", str(huge))


def test_a_matrix_too_large_is_refused_before_the_engine_renders(tmp_path: Path) -> None:
    values = ", ".join(f'"3.{minor}"' for minor in range(10, 10 + MAX_VARIANTS + 1))
    many = _file(tmp_path, "many.yaml", f"python: [{values}]\n")
    assert _fails("-m", str(many)) == (
        f"flagtree-feedstock: error: the variant files make {MAX_VARIANTS + 1} variants, more than "
        f"{MAX_VARIANTS} (fix: give the keys fewer values, or zip them (zip_keys))"
    )


def test_the_largest_render_allowed_ends_within_a_second_of_sigterm(tmp_path: Path) -> None:
    """A second of the command's own CPU time after the signal (on the clock, as long as a loaded machine makes
    that second), and no wait beyond it."""
    values = ", ".join(f'"3.{minor}"' for minor in range(10, 10 + MAX_VARIANTS))
    most = _file(tmp_path, "most.yaml", f"python: [{values}]\n")
    process = subprocess.Popen(
        [SCRIPT, "build", "--render-only", "-m", str(most)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Once the options are printed, the render is next: the signal lands in it (or just after it).
    assert process.stderr is not None
    for line in process.stderr:
        if "effective options" in line:
            break
    time.sleep(seconds(0.3))  # into the render, which takes about a second
    cpu, took = cost_after_signal(process, signal.SIGTERM, seconds(60))
    _, err = process.communicate(timeout=seconds(60))
    assert process.returncode in (0, 128 + signal.SIGTERM), err  # 0: it had finished before the signal
    assert cpu < seconds(1), f"{cpu:.2f} s of CPU time after SIGTERM"
    assert took < seconds(10), f"{took:.2f} s after SIGTERM, {cpu:.2f} s of it working"


def test_the_cross_builds_variants_file_renders_what_the_render_did(tmp_path: Path) -> None:
    """A cross build's worker hands the engine one variants.yaml (``variants_yaml``) instead of the files: read
    back as the engine reads it, it renders the same packages, zip_keys and python entries included."""
    import rattler_build as rb  # noqa: PLC0415

    from flagtree_feedstock.recipe.render import engine_variants, variants_yaml  # noqa: PLC0415

    zipped = _file(
        tmp_path,
        "zipped.yaml",
        'python: ["3.12", "3.13"]\nzip_keys: [c_compiler_version, cxx_compiler_version]\n'
        'c_compiler_version: ["12", "13"]\ncxx_compiler_version: ["12", "13"]\n',
    )
    config = engine_variants((GLOBAL, OWN, zipped), recipe_dir=OWN.parent, target="linux-aarch64", build=None)
    written = tmp_path / "variants.yaml"
    written.write_text(variants_yaml(config))
    platform = rb.PlatformConfig(target_platform="linux-aarch64")

    def packages(variants: object) -> list[tuple[str, str]]:
        rendered = rb.Stage0Recipe.from_file(OWN.parent / "recipe.yaml").render(
            variant_config=variants, render_config=rb.RenderConfig(platform=platform)
        )
        return sorted({(v.recipe.package.name, str(v.recipe.build.string)) for v in rendered})

    assert packages(rb.VariantConfig.from_file(written)) == packages(config)
    assert len([name for name, _ in packages(config) if name == "flagtree-cpu"]) == 4  # 2 pythons x 2 zipped


_REPORT_PEAK = (
    "import atexit, sys\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            sys.stderr.write('peak-kb ' + line.split()[1] + '\\n')\n"
    "atexit.register(peak)\n"
    "sys.argv = ['flagtree-feedstock', *sys.argv[1:]]\n"
    "from flagtree_feedstock._entry import entrypoint\n"
    "entrypoint()\n"
)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="no /proc here")
def test_issue_28s_5_mb_variant_file_is_refused_in_little_memory(tmp_path: Path) -> None:
    """The child's own peak (VmHWM, which starts afresh at exec, so pytest's size cannot leak in): before the
    bound the render grew to 7.3 GB on this file."""
    huge = tmp_path / "huge.yaml"
    huge.write_text("python:\n" + '  - "3.12"\n' * 500_000)
    done = subprocess.run(
        [sys.executable, "-c", _REPORT_PEAK, "build", "--render-only", "-m", str(huge)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=seconds(60),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "is larger than" in error_line(done.stderr)
    peak = int(next(line for line in done.stderr.splitlines() if line.startswith("peak-kb ")).split()[1])
    assert peak < 200 * 1024, f"{peak} kB"
