"""A Ctrl-C or SIGTERM at any moment of ``flagtree-feedstock bump``'s write leaves every pinned file as it was.

``bump --to only-flagtree`` writes three files all or nothing (recipe/pins.write_atomically): the variant file
and both recipes. The real console script runs once per moment of that write, with tests/signal_hook on
``PYTHONPATH`` sending the real signal at the Nth moment (before or after each operation on a file: creating a
staged file, writing it, closing it, setting its mode, keeping the old file, renaming it into place, removing
what is left), N from 1 until a run completes without one: SIGINT at the odd moments, SIGTERM at the even
ones (both take one path, flagtree_doctor.interrupts; every moment with each signal would double the test's
minute). After each, every file of the feedstock is compared byte for byte and by name with the files before:
nothing changed, nothing staged (``.tmp``) or kept (``.orig``) left. Once the last file has been renamed into place the write is done: a signal while the old files are
removed leaves the three new files (and nothing beside them), never a mix.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from _bump_sources import Standins, copy_feedstock, make_standins
from _timing import seconds

ROOT = Path(__file__).resolve().parents[1]
HOOK = Path(__file__).parent / "signal_hook"
CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
WRITE = "flagtree_feedstock.recipe.pins.write_atomically"
SIGNALS = (signal.SIGINT, signal.SIGTERM)  # the first moment's, the second's, the third's, ...
ENDINGS = {
    signal.SIGINT: ("flagtree-feedstock: interrupted\n", 130),
    signal.SIGTERM: ("flagtree-feedstock: terminated (SIGTERM)\n", 143),
}
# The files `--to only-flagtree` writes.
WRITTEN = ("recipe/conda_build_config.yaml", "recipe/recipe.yaml", "recipe/meta.yaml")
# More moments than this and the hook counts something it should not.
MOST_MOMENTS = 200


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    pins = yaml.safe_load((ROOT / "recipe" / "conda_build_config.yaml").read_text())
    return make_standins(tmp_path_factory.mktemp("bump-upstream"), pins["llvm_commit"][0])


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative name, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _restore(folder: Path, tree: dict[str, bytes]) -> None:
    """``folder``'s files made ``tree`` again (after a run that was let write them)."""
    for name in set(_tree(folder)) - set(tree):
        (folder / name).unlink()
    for name, content in tree.items():
        (folder / name).write_bytes(content)


def test_a_signal_at_any_moment_of_the_write_leaves_every_pinned_file_as_it_was(
    tmp_path: Path, standins: Standins
) -> None:
    feedstock = copy_feedstock(tmp_path / "feedstock", standins.pin)
    before = _tree(feedstock)
    scratch, mark = tmp_path / "scratch", tmp_path / "moment"
    scratch.mkdir()
    argv = [str(CONSOLE_SCRIPT), "bump", "--recipe-dir", str(feedstock / "recipe")]
    argv += ["--flagtree-src", str(standins.flagtree), "--to", "only-flagtree"]
    moments: list[str] = []
    changed: dict[int, dict[str, bytes]] = {}  # moment -> the files after it, where they are not as before
    while True:
        assert len(moments) < MOST_MOMENTS
        mark.unlink(missing_ok=True)
        signum = SIGNALS[len(moments) % len(SIGNALS)]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOK), os.environ.get("PYTHONPATH")])),
            "FLAGTREE_TEST_SIGNAL_AT": f"{len(moments) + 1}:{signum.name}:{WRITE}",
            "FLAGTREE_TEST_SIGNAL_MARK": str(mark),
            "TMPDIR": str(scratch),
        }
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, check=False, timeout=seconds(300)
        )
        assert list(scratch.iterdir()) == []  # the bump's scratch clones are removed, whatever the moment
        if not mark.exists():  # fewer moments than that: the run wrote, untouched
            assert done.returncode == 0, done.stderr
            break
        moments.append(mark.read_text().strip())
        assert (done.stderr, done.returncode) == ENDINGS[signum], (signum.name, moments[-1])
        if (after := _tree(feedstock)) != before:
            changed[len(moments)] = after
            _restore(feedstock, before)
    written = _tree(feedstock)
    assert {name for name in before if before[name] != written[name]} == set(WRITTEN)
    assert set(written) == set(before)
    # The write's moments: each file staged, kept and renamed into place, the leftovers removed.
    renames = [n for n, moment in enumerate(moments, 1) if moment == "after replace"]
    assert len(renames) == len(WRITTEN), moments
    assert len([m for m in moments if m.startswith("before tempfile.mkstemp")]) == len(WRITTEN), moments
    # Up to and with the last rename (a signal then is held, and the files are put back): every file as it
    # was. After it (the old files being removed): the write is done, every file new, nothing beside them.
    assert {n: moments[n - 1] for n in changed if n <= renames[-1]} == {}, "files not as before after these"
    assert all(changed.get(n) == written for n in range(renames[-1] + 1, len(moments) + 1)), {
        moments[n - 1] for n in range(renames[-1] + 1, len(moments) + 1) if changed.get(n) != written
    }
