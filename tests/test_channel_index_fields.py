"""``flagtree-feedstock channel index`` refuses a package whose ``info/index.json`` lacks a field it needs.

The fields: ``name``, ``version`` and ``build`` (conda finds a package by ``name-version-build``, its file
name) and ``build_number`` (py-rattler's indexer stops without it, with a message that names neither the
package nor the field). Each is left out, or left empty, of an otherwise good package (tests/_hostile_packages),
one at a time: the command names the package and the field on one line, exits 9, and writes no index. The good
package itself is indexed, so each refusal is that one field's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _hostile_packages import INDEX, STEM, channel_with, info_members, tar_bz2

CONSOLE_SCRIPT = Path(sys.executable).parent / "flagtree-feedstock"
NEEDED = ("name", "version", "build", "build_number")
NOT_A_WHOLE_NUMBER = "(a whole number, 0 or more)"


def _index(tmp_path: Path, index: dict[str, object]) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``channel index`` of a channel holding one package with ``index`` as its info/index.json."""
    channel, package = channel_with(
        tmp_path, f"{STEM}.tar.bz2", tar_bz2(info_members(index=json.dumps(index).encode()))
    )
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "channel", "index", str(channel)], capture_output=True, text=True, check=False
    )
    return done, package


def test_the_good_package_is_indexed(tmp_path: Path) -> None:
    done, package = _index(tmp_path, INDEX)
    assert done.returncode == 0, done.stderr
    repodata = json.loads((package.parent / "repodata.json").read_text())
    assert list(repodata["packages"]) == [package.name]


@pytest.mark.parametrize("how", ["missing", "empty"])
@pytest.mark.parametrize("field", NEEDED)
def test_a_package_lacking_one_needed_field_is_refused(tmp_path: Path, field: str, how: str) -> None:
    index = {key: value for key, value in INDEX.items() if key != field}
    if how == "empty":
        index[field] = ""
    done, package = _index(tmp_path, index)
    assert done.returncode == 9, done.stderr
    lacks = f"lacks the {field} {NOT_A_WHOLE_NUMBER if field == 'build_number' else '(or leaves it empty)'}"
    line = (
        f"flagtree-feedstock: error: {package} is damaged (its info/index.json {lacks}): it is not a whole conda "
        f"package (fix: remove it, then rebuild it (flagtree-feedstock build --output-dir {package.parent.parent}) "
        "or download it again)"
    )
    assert done.stderr.splitlines() == [line]
    assert sorted(p.name for p in package.parent.iterdir()) == [
        package.name
    ]  # no index written, nothing else
