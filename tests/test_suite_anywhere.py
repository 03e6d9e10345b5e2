"""The suite runs anywhere (issue 29 item 7): started in a subfolder, it runs from the repository root.

Its other parts are tested where they live: the archive memory tests measure the child's own ``VmHWM``
(tests/test_llvm_archive_members.py), the rehearsal's stub python carries the build string the variant file
asks for on every python (tests/_rehearsal_channel.py), and the help test reads either argparse layout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A test that reads recipe/ and conda_build_config.yaml from the working folder, as the commands do.
NEEDS_THE_ROOT = "test_llvm_archive.py::test_render_only_of_a_url_does_not_download_it"


def test_a_run_started_in_tests_runs_from_the_root(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "run"),
         NEEDS_THE_ROOT],
        cwd=ROOT / "tests", env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("1 passed"), done.stdout
