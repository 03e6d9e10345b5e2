"""`flagtree-feedstock build --llvm-archive`: the archive is checked before anything renders or builds.

The archives are stand-ins shaped like Triton's (one top folder llvm-<commit8>-ubuntu-arm64/ with bin/,
include/, lib/), whose bin/ programs are real aarch64 ELF files made by Debian's cross gcc: linked against
Debian's glibc 2.36, they need GLIBC_2.34 (__libc_start_main), as any program built against glibc >= 2.34
does, and one calling _dl_find_object needs GLIBC_2.35. A real Triton archive holds the same kind of files,
thousands more of them; what it needs is read the same way. A URL is served by a loopback HTTP server.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from _tools import aarch64_gcc, require_executable
from flagtree_feedstock import llvm_archive
from flagtree_feedstock.cli import main
from flagtree_feedstock.errors import ConfigurationError, SourceFetchError
from flagtree_feedstock.llvm_archive.fetch import SETUP_PY_MARKER

ROOT = Path(__file__).resolve().parents[1]
COMMIT8 = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())["llvm_commit"][0][:8]
TOP = f"llvm-{COMMIT8}-ubuntu-arm64"

_PROGRAM = '#include <stdio.h>\nint main(void) { return puts("stand-in tablegen") < 0; }\n'
# _dl_find_object is GLIBC_2.35 in libc.so.6 (glibc 2.35's NEWS): the program needs that version.
_PROGRAM_2_35 = (
    "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdio.h>\n"
    "int main(void) { struct dl_find_object found; "
    'return printf("%d\\n", _dl_find_object((void *)main, &found)) < 0; }\n'
)


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Stand-in tablegens: aarch64 needing GLIBC_2.34, aarch64 needing GLIBC_2.35, and an x86_64 one."""
    folder = tmp_path_factory.mktemp("programs")
    made = {}
    for name, compiler, source in (
        ("glibc-2.34", aarch64_gcc(), _PROGRAM),
        ("glibc-2.35", aarch64_gcc(), _PROGRAM_2_35),
        ("x86_64", require_executable("gcc", "gcc"), _PROGRAM),
    ):
        (folder / f"{name}.c").write_text(source)
        subprocess.run([compiler, str(folder / f"{name}.c"), "-o", str(folder / name)], check=True)
        made[name] = folder / name
    return made


def make_tree(
    root: Path, program: Path, *, top: str = TOP, tools: tuple[str, ...] = ("mlir-tblgen", "llvm-tblgen")
) -> Path:
    """An unpacked archive: the top folder with the tools (copies of ``program``), headers, libraries."""
    tree = root / top
    (tree / "bin").mkdir(parents=True)
    for tool in tools:
        shutil.copy2(program, tree / "bin" / tool)
    (tree / "bin" / "llvm-config").symlink_to("llvm-tblgen")
    (tree / "include" / "mlir" / "IR").mkdir(parents=True)
    (tree / "include" / "mlir" / "IR" / "Operation.h").write_text("/* stand-in */\n")
    (tree / "lib" / "cmake" / "llvm").mkdir(parents=True)
    (tree / "lib" / "libLLVMSupport.a").write_bytes(b"!<arch>\n")
    return tree


def make_archive(root: Path, program: Path, **tree: object) -> Path:
    made = make_tree(root / "tree", program, **tree)  # type: ignore[arg-type]
    archive = root / f"{made.name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(made, arcname=made.name)
    return archive


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The process environment with a cache of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return dict(os.environ)


def _resolve(
    value: str, sha256: str | None = None, *, env: dict[str, str], fetch: bool = True
) -> llvm_archive.LlvmArchive:
    found = llvm_archive.from_options(value, sha256, env=env, fetch=fetch)
    assert found is not None
    return found


def test_a_local_archive_is_given_by_file_url_with_its_computed_sha256(tmp_path, programs, env):
    archive = make_archive(tmp_path, programs["glibc-2.34"])
    found = _resolve(str(archive), env=env)
    assert found.url == archive.resolve().as_uri()
    assert found.sha256 == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert found.inspection == llvm_archive.Inspection(
        top=TOP, glibc="GLIBC_2.34", glibc_program="llvm-tblgen"
    )
    # The same, given as a file:// URL and with the right sha256 (any case).
    assert _resolve(found.url, found.sha256.upper(), env=env) == llvm_archive.LlvmArchive(
        origin=found.url, url=found.url, sha256=found.sha256, inspection=found.inspection
    )


def test_the_glibc_need_is_the_highest_of_any_program(tmp_path, programs, env):
    tree = make_tree(tmp_path / "tree", programs["glibc-2.34"])
    shutil.copy2(programs["glibc-2.35"], tree / "bin" / "llvm-objdump")
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=tree.name)
    inspection = _resolve(str(archive), env=env).inspection
    assert inspection is not None
    assert (inspection.glibc, inspection.glibc_program) == ("GLIBC_2.35", "llvm-objdump")


def _not_tar(tmp_path: Path, programs: dict[str, Path]) -> Path:
    path = tmp_path / "llvm.tar.gz"
    path.write_text("<html>404 Not Found</html>\n")
    return path


def _truncated(tmp_path: Path, programs: dict[str, Path]) -> Path:
    archive = make_archive(tmp_path, programs["glibc-2.34"])
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    return archive


def _two_tops(tmp_path: Path, programs: dict[str, Path]) -> Path:
    archive = tmp_path / "two.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(make_tree(tmp_path / "a", programs["glibc-2.34"]), arcname=TOP)
        tar.add(make_tree(tmp_path / "b", programs["glibc-2.34"]), arcname=f"{TOP}-copy")
    return archive


BAD_ARCHIVES = {
    "missing": (lambda tmp_path, programs: tmp_path / "nothing.tar.gz", "no such file or folder"),
    "not-tar": (_not_tar, "is not a tar archive"),
    "truncated": (
        _truncated,
        "is not a tar archive, or a damaged one (its compressed data: its gzip stream is cut short)",
    ),
    "two-tops": (
        _two_tops,
        f"holds {TOP}, {TOP}-copy at its top, not one folder llvm-<commit8>-ubuntu-arm64/",
    ),
    "x64-top": (
        lambda tmp_path, programs: make_archive(
            tmp_path, programs["glibc-2.34"], top=f"llvm-{COMMIT8}-ubuntu-x64"
        ),
        f"holds llvm-{COMMIT8}-ubuntu-x64 at its top",
    ),
    "no-tblgen": (
        lambda tmp_path, programs: make_archive(tmp_path, programs["glibc-2.34"], tools=("llvm-tblgen",)),
        f"has no {TOP}/bin/mlir-tblgen",
    ),
    "x86-tblgen": (
        lambda tmp_path, programs: make_archive(tmp_path, programs["x86_64"]),
        f"{TOP}/bin/mlir-tblgen is not an aarch64 program (ELF machine 62)",
    ),
}


@pytest.mark.parametrize("case", BAD_ARCHIVES)
@pytest.mark.usefixtures("env")
def test_a_bad_archive_is_one_line_and_nothing_renders_or_builds(
    tmp_path, programs, capsys, monkeypatch, case
):
    make, message = BAD_ARCHIVES[case]
    archive = make(tmp_path, programs)
    rendered = []
    monkeypatch.setattr("flagtree_feedstock.recipe.render.render", lambda *a, **k: rendered.append(a) or [])
    out = tmp_path / "channel"
    assert main(["build", "--output-dir", str(out), "--llvm-archive", str(archive)]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("flagtree-feedstock: error:")]
    assert message in line, line
    assert "(fix: " in line
    assert rendered == []
    assert not out.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ("--llvm-archive", "https://example.org/llvm.tar.gz"),
            "is a URL without a sha256 (fix: add --llvm-archive-sha256",
        ),
        (("--llvm-archive-sha256", "0" * 64), "--llvm-archive-sha256 works only with --llvm-archive"),
        (
            ("--llvm-archive", "x.tar.gz", "--llvm-archive-sha256", "abc"),
            "--llvm-archive-sha256 'abc' is not a sha256: it has 3 hex digits (fix:",
        ),
        (
            ("--llvm-archive", "x.tar.gz", "--llvm-archive-sha256", "a" * 63),
            f"--llvm-archive-sha256 '{'a' * 63}' is not a sha256: it has 63 hex digits (fix:",
        ),
        (
            ("--llvm-archive", "x.tar.gz", "--llvm-archive-sha256", "a" * 40),
            "is not a sha256: it has 40 hex digits, the length of a git commit (fix:",
        ),
        (
            ("--llvm-archive", "x.tar.gz", "--llvm-archive-sha256", "sha256:" + "a" * 64),
            "is not a sha256 (fix: give the 64 hex digits sha256sum prints)",
        ),
    ],
    ids=["url-without-sha256", "sha256-alone", "not-a-sha256", "a-digit-short", "a-commit", "not-hex"],
)
def test_bad_options_are_one_line(tmp_path, env, capsys, options, message):
    assert main(["build", "--render-only", *options], env=env) == 2
    assert message in capsys.readouterr().err


def test_a_sha256_that_differs_is_refused(tmp_path, programs, env, capsys):
    archive = make_archive(tmp_path, programs["glibc-2.34"])
    assert main(["build", "--llvm-archive", str(archive), "--llvm-archive-sha256", "a" * 64], env=env) == 2
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert f"has sha256 {digest}, not {'a' * 64} (--llvm-archive-sha256)" in capsys.readouterr().err


# --- an unpacked folder: packed reproducibly ---


def test_a_folder_is_packed_reproducibly_into_the_cache(tmp_path, programs, env):
    first = make_tree(tmp_path / "one", programs["glibc-2.34"])
    second = make_tree(tmp_path / "two", programs["glibc-2.34"])
    (second / SETUP_PY_MARKER).write_text("https://oaitriton.blob.core.windows.net/...\n")
    for path in second.rglob("*"):  # other times, same content
        if not path.is_symlink():
            os.utime(path, (1, 1))
    a, b = _resolve(str(first), env=env), _resolve(str(second), env=env)
    assert a.sha256 == b.sha256
    cached = Path(a.url.removeprefix("file://"))
    assert cached.parent == llvm_archive.cache_dir(env) and cached.name.startswith(f"{TOP}-")
    with tarfile.open(cached) as tar:
        names = tar.getnames()
        assert names[0] == TOP and f"{TOP}/{SETUP_PY_MARKER}" not in names
        assert tar.getmember(f"{TOP}/bin/llvm-config").issym()
        assert {(m.uid, m.mtime, m.uname) for m in tar.getmembers()} == {(0, 0, "")}
    with gzip.open(cached) as unpacked:
        unpacked.read(1)
    assert a.inspection == b.inspection and a.inspection is not None and a.inspection.glibc == "GLIBC_2.34"


def test_setup_py_s_symlink_to_the_folder_is_followed(tmp_path, programs, env):
    tree = make_tree(tmp_path, programs["glibc-2.34"])
    (tmp_path / "llvm-ubuntu-arm64").symlink_to(tree.name)
    assert (
        _resolve(str(tmp_path / "llvm-ubuntu-arm64"), env=env).sha256 == _resolve(str(tree), env=env).sha256
    )


def test_a_folder_named_otherwise_is_refused(tmp_path, programs, env):
    tree = make_tree(tmp_path, programs["glibc-2.34"], top="my-llvm")
    with pytest.raises(ConfigurationError, match="is not named like Triton's LLVM archive folder"):
        _resolve(str(tree), env=env)
    assert not llvm_archive.cache_dir(env).exists()


# --- a URL: downloaded once into the cache by a build, never by --render-only ---


@pytest.fixture
def served(
    tmp_path: Path, programs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server of one archive (its URL) and the paths it was asked for."""
    archive = make_archive(tmp_path / "served", programs["glibc-2.34"])
    requests: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(archive.parent), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{archive.name}", requests
    finally:
        server.shutdown()
        server.server_close()


def test_a_url_is_downloaded_once_checked_and_given_as_its_cached_copy(tmp_path, served, env):
    url, requests = served
    digest = hashlib.sha256((tmp_path / "served" / f"{TOP}.tar.gz").read_bytes()).hexdigest()
    unfetched = _resolve(url, digest, env=env, fetch=False)
    assert (unfetched.url, unfetched.inspection, requests) == (url, None, [])
    found = _resolve(url, digest, env=env)
    assert found.url.startswith(llvm_archive.cache_dir(env).as_uri()) and found.sha256 == digest
    assert found.inspection is not None and found.inspection.top == TOP
    assert _resolve(url, digest, env=env) == found
    assert len(requests) == 1


def test_a_download_with_another_sha256_leaves_nothing(tmp_path, served, env):
    url, requests = served
    with pytest.raises(SourceFetchError, match=f"downloaded with sha256 [0-9a-f]{{64}}, not {'b' * 64}"):
        _resolve(url, "b" * 64, env=env)
    assert len(requests) == 1
    assert list(llvm_archive.cache_dir(env).iterdir()) == []


def test_an_unreachable_url_is_a_fetch_error(env):
    with pytest.raises(SourceFetchError, match="could not be downloaded"):
        _resolve("http://127.0.0.1:9/llvm.tar.gz", "c" * 64, env=env)


# --- after the render: the recipe's LLVM commit and the glibc floor ---


def _variant_config(tmp_path: Path, c_stdlib_version: str) -> Path:
    """The repository's global variant file with another c_stdlib_version (what a user edits)."""
    text = (ROOT / "conda_build_config.yaml").read_text()
    assert 'c_stdlib_version:\n  - "2.17"\n' in text
    path = tmp_path / "conda_build_config.yaml"
    path.write_text(
        text.replace('c_stdlib_version:\n  - "2.17"\n', f'c_stdlib_version:\n  - "{c_stdlib_version}"\n')
    )
    return path


@pytest.mark.parametrize(
    "case",
    [
        (
            "glibc-2.34",
            "2.17",
            (
                "needs glibc 2.34 (llvm-tblgen needs GLIBC_2.34), above c_stdlib_version 2.17: libtriton.so would "
                'not link against that sysroot (fix: set c_stdlib_version to "2.34" in {variants}'
            ),
        ),
        (
            "glibc-2.35",
            "2.34",
            'above c_stdlib_version 2.34: libtriton.so would not link against that sysroot (fix: set c_stdlib_version to "2.39"',
        ),
    ],
)
@pytest.mark.usefixtures("env")
def test_an_archive_above_the_glibc_floor_is_refused_before_anything_builds(tmp_path, programs, capsys, case):
    program, floor, message = case
    archive = make_archive(tmp_path, programs[program])
    variants = _variant_config(tmp_path, floor)
    out = tmp_path / "channel"
    argv = [
        "build",
        "--variant-config",
        str(variants),
        "--output-dir",
        str(out),
        "--llvm-archive",
        str(archive),
    ]
    assert main(argv) == 2
    assert message.format(variants=variants) in capsys.readouterr().err
    assert not out.exists()


def test_no_sysroot_of_conda_forge_is_high_enough(tmp_path):
    """GLIBC_2.41 cannot be made here (Debian's glibc is 2.36): the decision alone, on a recorded inspection."""
    from flagtree_feedstock.recipe.render import render  # noqa: PLC0415

    keys = tmp_path / "archive.yaml"
    keys.write_text(f'llvm_archive_url: ["file:///x"]\nllvm_archive_sha256: ["{"0" * 64}"]\n')
    files = (ROOT / "conda_build_config.yaml", ROOT / "recipe" / "conda_build_config.yaml", keys)
    outputs = render(ROOT / "recipe" / "recipe.yaml", files, target="linux-aarch64")
    archive = llvm_archive.LlvmArchive(
        origin="x",
        url="file:///x",
        sha256="0" * 64,
        inspection=llvm_archive.Inspection(top=TOP, glibc="GLIBC_2.41", glibc_program="lld"),
    )
    with pytest.raises(
        ConfigurationError, match=r"conda-forge has no sysroot for glibc 2.41 \(newest 2.39\)"
    ):
        llvm_archive.check_rendered(archive, outputs)


def test_an_archive_of_another_llvm_commit_is_refused(tmp_path, programs, env, capsys):
    archive = make_archive(tmp_path, programs["glibc-2.34"], top="llvm-deadbeef-ubuntu-arm64")
    variants = _variant_config(tmp_path, "2.34")
    assert (
        main(
            ["build", "--render-only", "--variant-config", str(variants), "--llvm-archive", str(archive)],
            env=env,
        )
        == 2
    )
    assert (
        f"is LLVM deadbeef (llvm-deadbeef-ubuntu-arm64), the recipe's llvm_commit is {COMMIT8}"
        in capsys.readouterr().err
    )


def test_a_recipe_without_the_keys_is_refused(tmp_path, programs, env, capsys):
    toy = ROOT / "tests" / "recipes" / "toy-multi"
    archive = make_archive(tmp_path, programs["glibc-2.34"])
    argv = [
        "build",
        "--render-only",
        "--recipe-dir",
        str(toy),
        "--exclusive-config-file",
        str(toy / "conda_build_config.yaml"),
    ]
    assert main([*argv, "--llvm-archive", str(archive)], env=env) == 2
    assert (
        f"the recipes in {toy} do not read llvm_archive_url and llvm_archive_sha256"
        in capsys.readouterr().err
    )


# --- the render of the archive route ---


def test_render_only_shows_the_archive_and_the_glibc_it_is_built_against(tmp_path, programs, env, capsys):
    archive = make_archive(tmp_path, programs["glibc-2.34"])
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    variants = _variant_config(tmp_path, "2.34")
    out = tmp_path / "channel"
    argv = [
        "build",
        "--render-only",
        "--variant-config",
        str(variants),
        "--output-dir",
        str(out),
        "--python",
        "3.12",
    ]
    assert main([*argv, "--llvm-archive", str(archive)], env=env) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    llvm = lines.index(next(line for line in lines if line.startswith("  flagtree-llvm (")))
    assert f"llvm{COMMIT8}_archive_h" in lines[llvm]
    assert lines[llvm + 4 : llvm + 7] == [
        "    llvm-archive (url)",
        f"      {archive.resolve().as_uri()}",
        f"      sha256 {digest}",
    ]
    assert (
        f"flagtree-llvm: from Triton's LLVM archive (its programs need GLIBC_2.34):\n  {archive}\n"
        f"  (top folder {TOP}/)\n"
    ) in text
    assert "glibc: built against c_stdlib_version 2.34, so they need glibc >= 2.34 to run" in text
    assert not out.exists()
    assert main([*argv, "--json", "--llvm-archive", str(archive)], env=env) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["llvm_archive"] == {
        "origin": str(archive),
        "url": archive.resolve().as_uri(),
        "sha256": digest,
        "top_folder": TOP,
        "glibc": "GLIBC_2.34",
    }
    assert document["glibc_floor"] == "2.34"
    llvm_output = next(o for o in document["outputs"] if o["name"] == "flagtree-llvm")
    assert llvm_output["sources"][1] == {
        "url": archive.resolve().as_uri(),
        "sha256": digest,
        "folder": "llvm-archive",
    }


def test_render_only_of_a_url_does_not_download_it(env, capsys):
    url = "https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-a66376b0-ubuntu-arm64.tar.gz"
    assert (
        main(["build", "--render-only", "--llvm-archive", url, "--llvm-archive-sha256", "d" * 64], env=env)
        == 0
    )
    text = capsys.readouterr().out
    assert f"      {url}\n      sha256 {'d' * 64}\n" in text
    assert (
        f"flagtree-llvm: from Triton's LLVM archive, checked when the build downloads it:\n  {url}\n" in text
    )
    assert not llvm_archive.cache_dir(env).exists() or not any(llvm_archive.cache_dir(env).glob("*.tar.gz"))


def test_the_options_may_come_from_the_environment():
    from flagtree_feedstock.builder.options import from_cli  # noqa: PLC0415

    env = {"FLAGTREE_FEEDSTOCK_LLVM_ARCHIVE": "/a.tar.gz", "FLAGTREE_FEEDSTOCK_LLVM_ARCHIVE_SHA256": "e" * 64}
    options = from_cli({}, env)
    assert (options.llvm_archive, options.llvm_archive_sha256) == ("/a.tar.gz", "e" * 64)
    assert from_cli({"llvm_archive": "/b.tar.gz"}, env).llvm_archive == "/b.tar.gz"  # the command line wins


def test_conda_build_reads_the_archive_s_variant_file_after_the_global_one(tmp_path, monkeypatch):
    from flagtree_feedstock.builder import conda_build  # noqa: PLC0415

    monkeypatch.setattr(conda_build._subprocess, "which", lambda name, install_hint: f"/bin/{name}")
    (tmp_path / "meta.yaml").write_text("")
    request = conda_build.CondaBuildRequest(
        tool="conda-build",
        recipe_dir=tmp_path,
        exclusive_config_files=(Path("conda_build_config.yaml"),),
        variant_files=(Path("archive.yaml"),),
        channel_dir=tmp_path / "out",
        channels=("conda-forge",),
        target="linux-aarch64",
    )
    argv = conda_build.command(request, output_folder=tmp_path / "staging")
    assert argv[1:6] == [str(tmp_path), "-e", "conda_build_config.yaml", "-m", "archive.yaml"]


def test_render_only_says_when_a_variant_file_selects_an_archive_unchecked(tmp_path, env, capsys):
    """Without --llvm-archive the keys may still come from a variant file: the render must not say "source"."""
    variants = tmp_path / "conda_build_config.yaml"
    keys = {"llvm_archive_url": ["file:///x/llvm.tar.gz"], "llvm_archive_sha256": ["9" * 64]}
    variants.write_text((ROOT / "conda_build_config.yaml").read_text() + yaml.safe_dump(keys))
    assert main(["build", "--render-only", "--variant-config", str(variants)], env=env) == 0
    text = capsys.readouterr().out
    assert "flagtree-llvm: from the LLVM archive a variant file names (llvm_archive_url), unchecked" in text
    assert "built from source" not in text
    assert main(["build", "--render-only"], env=env) == 0
    assert "flagtree-llvm: built from source (llvm-project at llvm_commit)\n" in capsys.readouterr().out
