"""A damaged package (a CI artifact that did not fully download, flipped bytes) in a channel or output folder:
one line naming the file and the fix, a non-zero exit, no Rust panic, no traceback, nothing left behind.

The packages are real builds (py-rattler-build, offline), damaged the way it happens: cut short, or with a
run of bytes flipped in the middle.
"""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import pytest
import rattler_build

from _toy import RECIPES, build_args, error_line, make_empty_channel, native_args
from flagtree_feedstock.channel.index import index_channel
from flagtree_feedstock.cli import main


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An indexed channel folder of real packages: toy-multi's two for python 3.12 (``.conda``) and
    toy-test-env built as ``.tar.bz2``."""
    base = tmp_path_factory.mktemp("damaged")
    empty = make_empty_channel(base / "empty")
    out = base / "channel"
    with pytest.MonkeyPatch.context() as patch:
        for name in ("http_proxy", "https_proxy"):
            patch.setenv(name, "http://127.0.0.1:9")
        assert main(build_args("toy-multi", out, *native_args(empty), "--python", "3.12")) == 0
        with warnings.catch_warnings():  # deprecated; run_build has no package_format to make a .tar.bz2
            warnings.simplefilter("ignore", DeprecationWarning)
            rattler_build.build_recipes(
                [RECIPES / "toy-test-env" / "recipe.yaml"],
                variant_config=[str(RECIPES / "toy-test-env" / "conda_build_config.yaml")],
                channel=[empty.as_uri()],
                output_dir=base / "bz2",
                package_format="tar-bz2",
                test="skip",
            )
    (bz2,) = (base / "bz2" / "noarch").glob("*.tar.bz2")
    shutil.copy2(bz2, out / "noarch" / bz2.name)
    index_channel(out)
    return out


def _damage(package: Path, how: str) -> None:
    data = package.read_bytes()
    if how == "truncated":
        package.write_bytes(data[: len(data) // 2])
    else:
        middle = len(data) // 2
        package.write_bytes(
            data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 16]) + data[middle + 16 :]
        )


@pytest.mark.parametrize("how", ["truncated", "flipped"])
@pytest.mark.parametrize("kind", [".conda", ".tar.bz2"])
@pytest.mark.parametrize("command", ["channel index", "channel install", "build into it", "build -c it"])
def test_a_damaged_package_is_named_with_the_fix(
    built: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], *, how: str, kind: str, command: str
) -> None:
    folder = shutil.copytree(built, tmp_path / "folder")
    (package,) = [p for p in folder.glob(f"*/*{kind}") if p.name.startswith(("toy-py-", "toy-test-env-"))]
    _damage(package, how)
    before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    out = tmp_path / "out"
    argv = {
        "channel index": ["channel", "index", str(folder)],
        "channel install": ["channel", "install", str(folder), "toy-llvm", "--target-platform", "linux-64"],
        "build into it": build_args("toy-multi", folder, "--target-platform", "linux-64", "--no-test"),
        "build -c it": build_args("toy-multi", out, *native_args(folder)),
    }[command]
    assert main(argv) == 9
    captured = capfd.readouterr()  # file-descriptor level: a Rust panic would print there
    assert "panicked" not in captured.err
    assert "Traceback" not in captured.err
    assert re.fullmatch(
        rf"flagtree-feedstock: error: {re.escape(str(package))} is damaged \([^)]+\): it is not a whole conda "
        rf"package \(fix: remove it, then rebuild it \(flagtree-feedstock build --output-dir "
        rf"{re.escape(str(folder))}\) or download it again\)",
        error_line(captured.err),
    ), error_line(captured.err)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == before  # no .tmp, nothing new
    assert not out.exists()
    assert not list(tmp_path.glob(".*staging*"))  # (the lock file a build or an index takes may be there)
