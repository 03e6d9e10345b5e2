"""Our reading of a package against rattler's, on hostile packages Hypothesis generates (issue 41 item 2).

For each generated package (:mod:`_package_strategies`): either the toolkit refuses it in one line (the reader
or the whole check), or what ``rattler.package_streaming.extract`` writes of the ORIGINAL (files and their
bytes, symlinks and their targets, folders, the executable bit) is exactly what our reader saw; and the copy
the toolkit writes of it (:func:`flagtree_feedstock.channel.repack.repacked`), extracted by rattler, is exactly
that too, with normal modes only (files 0644 or 0755, no folder world-writable, setuid, setgid or sticky,
issue 47 item 5). The generated names and link targets hold control characters in every field that can carry
one (issue 47 item 4): each such package must be refused. The default tier runs a bounded, derandomised number of examples (``differential`` profile); the
``differential`` marker runs many more (``python -m pytest -m differential``, docs/testing.md).

The smallest example of every hole this test found is kept below as a plain case.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings

from _hostile_packages import STEM, Part, channel_with, header, info_members, member, tar_bz2
from _package_strategies import Drawn, View, packages, rattler_view
from _peak_memory import console_script
from _timing import seconds
from _toy import error_line
from flagtree_feedstock._archive import open_package
from flagtree_feedstock.channel.repack import repacked
from flagtree_feedstock.errors import ChannelError

# Database-free and deterministic: the same examples on every machine and every run (CI included).
settings.register_profile(
    "differential",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=500,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("differential-long", parent=settings.get_profile("differential"), max_examples=5000)


def our_view(package: Path) -> View:
    """What the toolkit's reader reads of ``package``: every member as rattler would write it (a hard link is a
    file with its target's bytes and mode, every folder above a member is a folder)."""
    view: View = {}
    files: dict[str, tuple[str, str, bool]] = {}
    with open_package(package) as reading:
        for member in reading:
            parts = member.name.split("/")
            for depth in range(1, len(parts)):
                view.setdefault("/".join(parts[:depth]), ("dir", "", False))
            if member.kind == "file":
                digest = hashlib.sha256()
                while chunk := reading.read(1 << 20):
                    digest.update(chunk)
                files[member.name] = ("file", digest.hexdigest(), bool(member.mode & stat.S_IXUSR))
                view[member.name] = files[member.name]
            elif member.kind == "hardlink":
                view[member.name] = files[member.target]
            elif member.kind == "symlink":
                view[member.name] = ("symlink", member.target, False)
            else:
                view[member.name] = ("dir", "", False)
    return view


def check_one(drawn: Drawn, scratch: Path) -> str:
    """The differential property for one package; what happened ("refused", "same")."""
    package = scratch / f"{STEM}{drawn.suffix}"
    package.write_bytes(drawn.content)
    try:
        copy = repacked(package, scratch / "cache")
    except ChannelError as refusal:
        assert "\n" not in str(refusal), str(refusal)
        return "refused: a control character" if "control character" in str(refusal) else "refused"
    ours = our_view(package)
    assert rattler_view(package, scratch / "original") == ours, drawn.notes
    assert rattler_view(copy.path, scratch / "copy") == ours, drawn.notes
    assert unusual_modes(scratch / "copy") == {}, drawn.notes
    return "same"


def unusual_modes(root: Path) -> dict[str, str]:
    """What under ``root`` has a mode a copy never gives: a file other than 0644 or 0755, a folder that is
    world-writable, setuid, setgid or sticky (a folder rattler makes itself follows the umask)."""
    found = {}
    for path in root.rglob("*"):
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        bad = stat.S_IMODE(mode) not in (0o644, 0o755) if stat.S_ISREG(mode) else bool(mode & 0o7002)
        if bad:
            found[path.relative_to(root).as_posix()] = f"{stat.S_IMODE(mode):04o}"
    return found


@settings(settings.get_profile("differential"))
@given(packages())
def test_rattler_extracts_what_our_reader_read_or_the_toolkit_refuses(drawn: Drawn) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        event(check_one(drawn, Path(scratch)))  # --hypothesis-show-statistics counts each outcome


@pytest.mark.differential
@settings(settings.get_profile("differential-long"))
@given(packages())
def test_the_long_run(drawn: Drawn) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        check_one(drawn, Path(scratch))


# The smallest example of each hole the differential test found, kept as a plain case: (members, the refusal
# after "<package> is refused, and was not used: "). rattler cannot unpack either ("Is a directory", "Not a
# directory"), where our reader read a file and a folder at one path.
HOLES: dict[str, tuple[list[Part], str]] = {
    "a-file-below-a-hard-link": (
        [
            *info_members(["lib/a", "lib"]),
            *member("lib/a", b""),
            header("lib", kind=tarfile.LNKTYPE, linkname="lib/a"),
        ],
        "member 'lib/a' lies below 'lib', a file of the package: readers differ on which of the two is there",
    ),
    "a-file-below-a-file": (
        [*info_members(["lib", "lib/a"]), *member("lib", b"x"), *member("lib/a", b"")],
        "member 'lib/a' lies below 'lib', a file of the package: readers differ on which of the two is there",
    ),
}


@pytest.mark.parametrize("case", HOLES)
def test_a_hole_the_differential_test_found_is_refused(case: str, tmp_path: Path) -> None:
    parts, why = HOLES[case]
    channel, package = channel_with(tmp_path, f"{STEM}.tar.bz2", tar_bz2(parts))
    with pytest.raises(OSError):  # rattler's reading: it cannot make the package's folder
        rattler_view(package, tmp_path / "extracted")
    done = subprocess.run(
        [console_script("flagtree-feedstock"), "channel", "index", str(channel)],
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )
    assert done.returncode == 9, done.stderr
    assert error_line(done.stderr).startswith(
        f"flagtree-feedstock: error: {package} is refused, and was not used: {why} (fix: "
    )
    assert not (channel / "noarch" / "repodata.json").exists()
