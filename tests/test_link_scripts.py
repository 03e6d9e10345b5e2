"""No channel code runs unasked (issue 41 item 5): a package that carries link scripts is refused by `channel
install` and `build`, in one line naming it and ``--allow-link-scripts``, unless the user allowed it by name.

A name a NUL cuts to a link script's for one reader only (a PAX path ``bin/.evil-post-link.sh\\0.txt``, issue
47 item 4) is refused by `channel index` and `channel install`, whatever is allowed.

The package's post-link script writes a file outside the prefix, where the test looks for it: refused, nothing
is written; allowed, the script runs (py-rattler's installer for `channel install`, the engine for the host
environment of `build`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from rattler.index import index_fs

from _hostile_packages import (
    INDEX,
    STEM,
    Part,
    channel_with,
    conda,
    member,
    package_with_files,
    pax,
    sha256,
    tar_bz2,
)
from _toy import build_args, error_line, native_args, run_toolkit
from flagtree_feedstock.channel.link_scripts import link_scripts


def _with_script(name: str, script_path: str, planted: Path) -> bytes:
    """The package ``name`` (index.json's), whose ``script_path`` writes ``planted`` when run; it holds
    ``share/<name>.txt`` too (toy-host copies toy-dep's)."""
    script = f'#!/bin/bash\nprintf "ran for %s\\n" "$PKG_NAME" > "{planted}"\n'.encode()
    files = {script_path: script, f"share/{name}.txt": b"dep\n"}
    return package_with_files(name, files)


def _refusal(where: Path, name: str, script: str) -> str:
    return (
        f"flagtree-feedstock: error: {where} ({name}) carries the link script {script!r}, which the installer "
        f"would run as it installs it: refused, and was not used (fix: if you trust {name} to run its own code "
        f"on this machine, allow it: --allow-link-scripts {name})"
    )


@pytest.mark.parametrize(
    "script", ["bin/.evil-post-link.sh", "bin/.other-pre-unlink.sh", "python-scripts/.evil-pre-link.sh"]
)
def test_channel_install_refuses_a_package_with_link_scripts_and_runs_them_when_allowed(
    script: str, tmp_path: Path
) -> None:
    """Any link script's name, of the package or of another one (the installer looks for it in the prefix,
    whoever put it there), in any folder (a noarch python package's python-scripts/ lands in bin/)."""
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, package = channel_with(tmp_path, f"{STEM}.tar.bz2", _with_script("evil", script, planted))
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    prefix = tmp_path / "prefix"
    refused = run_toolkit(["channel", "install", str(channel), "evil", "--prefix", str(prefix)], tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == _refusal(package, "evil", script)
    assert not planted.exists()
    assert not prefix.exists()
    allowed = run_toolkit(
        ["channel", "install", str(channel), "evil", "--prefix", str(prefix), "--allow-link-scripts", "other",
         "--allow-link-scripts", "EVIL"],
        tmp_path,
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    # The installer runs bin/.evil-post-link.sh only: the other forms are refused as well, never run here.
    assert planted.exists() == (script == "bin/.evil-post-link.sh")
    if planted.exists():
        assert planted.read_text() == "ran for evil\n"


def test_link_scripts_match_every_form_and_nothing_else() -> None:
    paths = [
        "bin/.a-post-link.sh",
        "bin/.a-pre-link.sh",
        "bin/.a-pre-unlink.sh",
        "Scripts/.a-post-link.bat",
        "bin/.A-POST-LINK.SH",
        "share/deep/.b-post-link.sh",
        "bin/a-post-link.sh",  # not hidden: not a link script's name
        "bin/.a-post-link.sh.orig",
        "bin/.post-link.sh",
        "bin/tool",
    ]
    assert link_scripts(paths) == tuple(sorted(paths[:6]))


def _toy_dep_channel(tmp_path: Path, planted: Path) -> tuple[Path, Path]:
    """A local channel holding toy-dep, toy-host's host requirement, with a post-link script."""
    content = _with_script("toy-dep", "bin/.toy-dep-post-link.sh", planted)
    channel, package = channel_with(tmp_path, "toy-dep-1-0.tar.bz2", content)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    return channel, package


@pytest.mark.parametrize("allow", ["option", "environment"])
def test_a_build_refuses_a_host_requirement_with_a_post_link_script_and_lets_the_engine_run_it_when_allowed(
    allow: str, tmp_path: Path
) -> None:
    """The engine runs a host requirement's post-link script as it makes the host environment (issue 41): the
    build refuses the package before the engine installs it; allowed by name, the engine runs it."""
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, package = _toy_dep_channel(tmp_path, planted)
    out = tmp_path / "out"
    argv = build_args("toy-host", out, *native_args(channel))
    refused = run_toolkit(argv, tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == _refusal(package, "toy-dep", "bin/.toy-dep-post-link.sh")
    assert not planted.exists()
    assert not list(out.rglob("*.conda"))
    if allow == "option":
        allowed = run_toolkit([*argv, "--allow-link-scripts", "toy-dep"], tmp_path)
    else:
        allowed = run_toolkit(argv, tmp_path, FLAGTREE_FEEDSTOCK_ALLOW_LINK_SCRIPTS="toy-dep")
    assert allowed.returncode == 0, allowed.stderr
    assert planted.read_text() == "ran for toy-dep\n"
    assert [p.name for p in out.glob("*/*.conda")] == [p.name for p in out.glob("linux-64/toy-host-*.conda")]


def test_a_noarch_python_entry_point_named_as_a_link_script_is_refused(tmp_path: Path) -> None:
    """The installer writes bin/<name> for each entry point of info/link.json: one named as a link script is
    one, though the package holds no such file."""
    link = {"noarch": {"type": "python", "entry_points": [".evil-post-link.sh = evil.cli:main"]}}
    parts: list[Part] = [
        *member("info/index.json", json.dumps(INDEX | {"noarch": "python"}).encode()),
        *member("info/paths.json", json.dumps({"paths_version": 1, "paths": []}).encode()),
        *member("info/link.json", json.dumps(link).encode()),
    ]
    channel, package = channel_with(tmp_path, f"{STEM}.tar.bz2", tar_bz2(parts))
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    prefix = tmp_path / "prefix"
    refused = run_toolkit(["channel", "install", str(channel), "evil", "--prefix", str(prefix)], tmp_path)
    assert refused.returncode == 9, refused.stderr
    assert error_line(refused.stderr) == _refusal(package, "evil", "bin/.evil-post-link.sh")
    assert not prefix.exists()


NUL_SCRIPT = "bin/.evil-post-link.sh\0.txt"


def _with_nul_in_its_pax_path(fmt: str, planted: Path) -> bytes:
    """Issue 47 item 4's reproduction: a member whose PAX path is ``bin/.evil-post-link.sh\\0.txt``, listed so
    in paths.json. Our reader kept the whole name (a .txt, no link script in the record); the copy's writer
    stored it as a GNU long name every reader cuts at the NUL: a post-link script in the copy."""
    script = f'#!/bin/bash\necho ran > "{planted}"\n'.encode()
    listed = [
        {"_path": NUL_SCRIPT, "path_type": "hardlink", "sha256": sha256(script), "size_in_bytes": len(script)}
    ]
    info = [
        *member("info/index.json", json.dumps(INDEX).encode()),
        *member("info/paths.json", json.dumps({"paths_version": 1, "paths": listed}).encode()),
    ]
    payload = [*pax({"path": NUL_SCRIPT}), *member("bin/placeholder.txt", script)]
    return conda(info, payload) if fmt == "conda" else tar_bz2([*info, *payload])


@pytest.mark.parametrize("fmt", ["conda", "tar.bz2"])
@pytest.mark.parametrize("command", ["index", "install", "install-allowing-another"])
def test_a_nul_in_a_pax_path_is_refused_in_one_line_and_nothing_is_written(
    command: str, fmt: str, tmp_path: Path
) -> None:
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    channel, package = channel_with(tmp_path, f"{STEM}.{fmt}", _with_nul_in_its_pax_path(fmt, planted))
    if command != "index":
        asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    indexed = sorted(p.relative_to(channel) for p in channel.rglob("*"))
    prefix = tmp_path / "prefix"
    install = ["channel", "install", str(channel), "evil", "--prefix", str(prefix)]
    argv = {
        "index": ["channel", "index", str(channel)],
        "install": install,
        "install-allowing-another": [*install, "--allow-link-scripts", "other"],
    }[command]
    done = run_toolkit(argv, tmp_path)
    assert done.returncode == 9, done.stderr
    assert error_line(done.stderr).startswith(
        f"flagtree-feedstock: error: {package} is refused, and was not used: member "
        "'bin/.evil-post-link.sh\\x00.txt': its name holds the control character '\\x00': "
    )
    assert not planted.exists()
    assert not prefix.exists()
    assert sorted(p.relative_to(channel) for p in channel.rglob("*")) == indexed
    for cache in (tmp_path / "xdg", tmp_path / "cache"):
        assert not [p for p in cache.rglob("*") if not p.is_dir()], cache
