"""The suite runs anywhere (issue 29 item 7): started in a subfolder, it runs from the repository root, and the
caches the commands write are the run's own, never the user's ``~/.cache`` another run writes too.

Its other parts are tested where they live: the archive memory tests measure the child's own ``VmHWM``
(tests/test_llvm_archive_members.py), the rehearsal's stub python carries the build string the variant file
asks for on every python (tests/_rehearsal_channel.py), and the help test reads either argparse layout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _stub_channel import write_package
from _timing import seconds
from conftest import USER_CACHE

ROOT = Path(__file__).resolve().parents[1]
# A test that reads recipe/ and conda_build_config.yaml from the working folder, as the commands do.
NEEDS_THE_ROOT = "test_llvm_archive.py::test_render_only_of_a_url_does_not_download_it"


def test_a_run_started_in_tests_runs_from_the_root(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "run"),
         NEEDS_THE_ROOT],
        cwd=ROOT / "tests", env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, timeout=seconds(600), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("1 passed"), done.stdout


def test_the_caches_the_commands_write_are_this_runs_own(tmp_path: Path) -> None:
    """rattler's package cache (under XDG_CACHE_HOME) gets what ``channel install`` unpacks: in a folder of this
    run's, not the user's, where a package of the same file name from another run would stand in for it."""
    cache = Path(os.environ["XDG_CACHE_HOME"])
    assert cache.is_dir() and cache.name.startswith("flagtree-tests-cache-"), cache
    assert not cache.is_relative_to(USER_CACHE) and not USER_CACHE.is_relative_to(cache)
    channel = tmp_path / "channel"
    write_package(
        channel / "noarch" / "stub-run-cache-1.0-h0_0.tar.bz2", "stub-run-cache", "1.0", "h0_0", "noarch"
    )
    binary = Path(sys.executable).parent / "flagtree-feedstock"
    # Without the rehearsal's session cache (RATTLER_CACHE_DIR, set for the rest of the session once a rehearsal
    # test ran): the default, XDG_CACHE_HOME's, is the one under test.
    env = {name: value for name, value in os.environ.items() if name != "RATTLER_CACHE_DIR"}
    for argv in (["channel", "index", str(channel)],
                 ["channel", "install", str(channel), "stub-run-cache", "--prefix", str(tmp_path / "env")]):  # fmt: skip
        done = subprocess.run(
            [str(binary), *argv], capture_output=True, text=True, timeout=seconds(300), check=False, env=env
        )
        assert done.returncode == 0, done.stderr
    assert (cache / "rattler" / "cache" / "pkgs" / "stub-run-cache-1.0-h0_0").is_dir()
