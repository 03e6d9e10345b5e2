"""``flagtree-feedstock bump`` on stand-in upstream repositories (tests/_bump_sources.py), and with
``FLAGTREE_SRC`` on FlagTree's real history.

Each case of issue 19 is a branch of the stand-in FlagTree: a commit that moves only FlagTree, one that moves
the LLVM hash, one where patches need a refresh, one where a patch fails, and flagtree-cpu clones whose builder
API fits or no longer matches. The bump runs through the CLI (``main``) against a copy of the repository's
recipe folder and patches, so the real recipe order, variant file and llvm_distribution.py are what it reads.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rattler import Version

from _bump_sources import (
    NEW_LLVM,
    OLDER_TAG,
    PINNED_CPU,
    TAG,
    Standins,
    copy_feedstock,
    git,
    llvm_archive,
    make_standins,
)
from _rehearsal_sources import preimages, render_preimage
from _timing import seconds
from _tools import sources_required, upstream_source, with_file_mounted_on_itself
from flagtree_feedstock.bump.patching import (
    DirectoryTree,
    apply_series,
    parse_diff,
    recipe_series,
    regenerate,
)
from flagtree_feedstock.bump.run import derive_version
from flagtree_feedstock.cli import main
from flagtree_feedstock.recipe import pins as pins_module

ROOT = Path(__file__).resolve().parents[1]
VARIANT = Path("recipe") / "conda_build_config.yaml"
RECIPES = ("recipe.yaml", "meta.yaml")
# Where each recipe holds the packages' SOURCE_DATE_EPOCH (N: the seconds): recipe.yaml's context, and
# meta.yaml's jinja variable; never extra, where conda-forge's lint allows only recipe-maintainers and
# feedstock-name.
EPOCH_LINES = {"recipe.yaml": "  source_date_epoch: N", "meta.yaml": "{% set source_date_epoch = N %}"}


@pytest.fixture(scope="session")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    pins = yaml.safe_load((ROOT / VARIANT).read_text())
    return make_standins(tmp_path_factory.mktemp("bump-upstream"), pins["llvm_commit"][0])


@pytest.fixture
def feedstock(tmp_path: Path, standins: Standins) -> Path:
    return copy_feedstock(tmp_path / "feedstock", standins.pin)


def run(feedstock: Path, standins: Standins, *args: str) -> int:
    return main(
        ["bump", "--recipe-dir", str(feedstock / "recipe"), "--flagtree-src", str(standins.flagtree), *args]
    )


def report(
    feedstock: Path, standins: Standins, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict]:
    status = run(feedstock, standins, *args, "--json")
    document = json.loads(capsys.readouterr().out)
    # Every JSON document of the toolkit and the doctor leads with its schema_version.
    assert next(iter(document)) == "schema_version" and document["schema_version"] == "1"
    return status, document


def checks(document: dict) -> dict[str, str]:
    return {check["name"]: check["status"] for check in document["checks"]}


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]  # fmt: skip


# ---- the five cases -----------------------------------------------------------------------------------------


def test_a_commit_that_moves_only_flagtree(feedstock: Path, standins: Standins, capsys) -> None:
    before = (feedstock / VARIANT).read_text()
    recipes = {name: (feedstock / "recipe" / name).read_text() for name in RECIPES}
    status, document = report(feedstock, standins, capsys, "--to", "only-flagtree")
    assert status == 0
    new = git(standins.flagtree, "rev-parse", "only-flagtree")
    epoch = git(standins.flagtree, "show", "-s", "--format=%ct", new)
    assert {k: v["new"] for k, v in document["pins"].items() if v["new"] != v["old"]} == {
        "flagtree_version": "0.6.0.post1",
        "flagtree_commit": new,
        "source_date_epoch": epoch,
    }
    assert set(checks(document).values()) <= {"ok", "skip"}
    assert checks(document)["patches-flagtree"] == "ok"
    # Only the two values changed; every comment and the quoting are kept.
    after = (feedstock / VARIANT).read_text()
    assert changed_lines(before, after) == [
        '-  - "0.6.0"',
        '+  - "0.6.0.post1"',
        f'-  - "{standins.pin}"',
        f'+  - "{new}"',
    ]
    # Both recipes' SOURCE_DATE_EPOCH is the new commit's date: that line alone changed in each.
    for name, text in recipes.items():
        line = EPOCH_LINES[name]
        pattern = "^" + re.escape(line).replace("N", r"(\d+)") + "$"
        old_epoch = re.search(pattern, text, re.MULTILINE)[1]  # type: ignore[index]
        assert changed_lines(text, (feedstock / "recipe" / name).read_text()) == [
            "-" + line.replace("N", old_epoch),
            "+" + line.replace("N", epoch),
        ], name
    assert document["written"] == [
        str(feedstock / VARIANT),
        *(str(feedstock / "recipe" / n) for n in RECIPES),
    ]
    assert not list((feedstock / "recipe").glob(".*.tmp"))


def test_the_pinned_epoch_is_the_pinned_commits_date() -> None:
    """The recipes' SOURCE_DATE_EPOCH is flagtree_commit's committer date, in a real FlagTree clone."""
    clone = upstream_source("FLAGTREE_SRC")
    (commit,) = yaml.safe_load((ROOT / VARIANT).read_text())["flagtree_commit"]
    date = git(clone, "show", "-s", "--format=%ct", commit)
    for name in RECIPES:
        text = (ROOT / "recipe" / name).read_text()
        assert EPOCH_LINES[name].replace("N", date) + "\n" in text, name


def test_nothing_moved_is_no_change(feedstock: Path, standins: Standins, capsys) -> None:
    before = (feedstock / VARIANT).read_text()
    status, document = report(feedstock, standins, capsys, "--to", TAG)
    assert (status, document["moved"], document["written"], document["checks"]) == (0, False, [], [])
    assert (feedstock / VARIANT).read_text() == before
    assert run(feedstock, standins, "--to", TAG) == 0
    assert capsys.readouterr().out.startswith(f"nothing to bump: FlagTree {standins.pin[:8]}")


def test_a_commit_that_moves_the_llvm_hash_needs_its_sha256(
    feedstock: Path, standins: Standins, capsys
) -> None:
    before = (feedstock / VARIANT).read_text()
    assert run(feedstock, standins, "--to", "llvm") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert f"moves llvm_commit {standins.llvm_commit[:8]} -> {NEW_LLVM[:8]}" in error
    assert "(fix: pass --llvm-archive FILE" in error
    assert (feedstock / VARIANT).read_text() == before

    sha256 = "ab" * 32
    status, document = report(
        feedstock, standins, capsys, "--to", "llvm", "--llvm-sha256", sha256, "--dry-run"
    )
    assert status == 0
    assert document["pins"]["llvm_commit"]["new"] == NEW_LLVM
    assert document["pins"]["llvm_sha256"] == {"old": yaml.safe_load(before)["llvm_sha256"][0], "new": sha256,
                                               "source": "--llvm-sha256"}  # fmt: skip
    assert (feedstock / VARIANT).read_text() == before  # a dry run writes nothing


def test_the_llvm_sha256_comes_from_the_archive_of_that_commit(
    feedstock: Path, standins: Standins, tmp_path: Path, capsys
) -> None:
    # An archive of another commit is refused in one line.
    other = llvm_archive(tmp_path / "other.tar.gz", standins.llvm_commit)
    assert run(feedstock, standins, "--to", "llvm", "--llvm-archive", str(other)) == 2
    error = capsys.readouterr().err
    assert f"holds llvm-project-{standins.llvm_commit}, not llvm-project-{NEW_LLVM}" in error
    archive = llvm_archive(tmp_path / "llvm.tar.gz", NEW_LLVM)
    status, document = report(feedstock, standins, capsys, "--to", "llvm", "--llvm-archive", str(archive))
    assert status == 0
    written = yaml.safe_load((feedstock / VARIANT).read_text())
    assert written["llvm_commit"] == [NEW_LLVM]
    assert written["llvm_sha256"] == [hashlib.sha256(archive.read_bytes()).hexdigest()]
    assert document["pins"]["llvm_sha256"]["source"] == "--llvm-archive llvm.tar.gz"


def test_a_patch_at_an_offset_is_refreshed(
    feedstock: Path, standins: Standins, tmp_path: Path, capsys
) -> None:
    patches = {p.name: p.read_text() for p in (feedstock / "patches" / "flagtree").glob("*.patch")}
    assert run(feedstock, standins, "--to", "refresh", "--dry-run") == 0
    out = capsys.readouterr().out
    # The diff of each refreshed patch file is shown: only hunk positions, index lines and the From line move.
    assert "+++ b/patches/flagtree/0003-Use-the-CPU-build-path-of-_build-when-the-cpu-backen.patch" in out
    assert "-@@ -5," in out and "+@@ -7," in out
    assert {p.name: p.read_text() for p in (feedstock / "patches" / "flagtree").glob("*.patch")} == patches

    status, document = report(feedstock, standins, capsys, "--to", "refresh")
    assert status == 0
    assert checks(document)["patches-flagtree"] == "refresh"
    refreshed = sorted(Path(p).name for p in document["written"] if p.endswith(".patch"))
    assert refreshed == [name for name in sorted(patches) if name.startswith(("0003", "0004", "0011"))]
    for name in refreshed:
        new = (feedstock / "patches" / "flagtree" / name).read_text()
        old_lines, new_lines = patches[name].splitlines(), new.splitlines()
        # Same header and message: From:, Date:, Subject: and the body are those of the original.
        cut = old_lines.index("---")
        assert new_lines[1:cut] == old_lines[1:cut]
        assert {line[:3] for line in changed_lines(patches[name], new)} <= {
            "-Fr",
            "+Fr",
            "-in",
            "+in",
            "-@@",
            "+@@",
        }
        # The index lines' hashes as long as the original's (git's default in a small repository is shorter).
        lengths = [
            [len(line.split()[1]) for line in text if line.startswith("index ")]
            for text in (old_lines, new_lines)
        ]
        assert lengths[0] and lengths[1] == lengths[0]
    # The refreshed series applies exactly to the new commit.
    tree = tmp_path / "refresh-tree"
    git(standins.flagtree, "worktree", "add", "-q", "--detach", str(tree), "refresh")
    try:
        series = recipe_series(feedstock / "recipe" / "recipe.yaml")["flagtree"]
        assert {o.status for o in apply_series(series, DirectoryTree(tree))} == {"exact"}
    finally:
        git(standins.flagtree, "worktree", "remove", "--force", str(tree))


def test_a_patch_that_fails_is_reported_with_its_hunk(feedstock: Path, standins: Standins, capsys) -> None:
    before = (feedstock / VARIANT).read_text()
    assert run(feedstock, standins, "--to", "fails") == 11
    captured = capsys.readouterr()
    assert "0006-Do-not-build-with-Werror.patch: hunk #1 (CMakeLists.txt:" in captured.out
    assert "-Werror -Wno-covered-switch-default" in captured.out  # the hunk itself
    assert captured.err.count("\n") == 1
    assert "checks failed for FlagTree" in captured.err and "(patches-flagtree)" in captured.err
    assert (feedstock / VARIANT).read_text() == before


def test_a_flagtree_cpu_that_fits_moves_its_pin_and_sleef(
    feedstock: Path, standins: Standins, capsys
) -> None:
    status, document = report(
        feedstock, standins, capsys, "--to", "only-flagtree", "--flagtree-cpu-src", str(standins.cpu_fits)
    )
    assert status == 0, document["checks"]
    assert document["pins"]["flagtree_cpu_commit"]["new"] == git(standins.cpu_fits, "rev-parse", "HEAD")
    assert document["pins"]["sleef_commit"]["new"] == standins.sleef
    assert {name: status for name, status in checks(document).items() if status != "skip"} == dict.fromkeys(("version", "llvm-commit", "patches-flagtree", "patches-flagtree-cpu", "llvm-libraries", "plain-libraries", "link-script", "builtin-keyword", "builder-methods", "tritoncpu-ops"), "ok")  # fmt: skip
    summaries = {check["name"]: check["summary"] for check in document["checks"]}
    assert (
        summaries["patches-flagtree-cpu"] == "2 patches applied in recipe order with GNU patch -F0, no offset"
    )


def test_flagtree_cpu_alone_can_move(feedstock: Path, standins: Standins, capsys) -> None:
    before = (feedstock / VARIANT).read_text()
    status, document = report(feedstock, standins, capsys, "--flagtree-cpu-src", str(standins.cpu_fits))
    assert status == 0, document["checks"]
    cpu = git(standins.cpu_fits, "rev-parse", "HEAD")
    assert [line[5:] for line in changed_lines(before, (feedstock / VARIANT).read_text())] == [
        f'"{PINNED_CPU}"',
        f'"{cpu}"',
        f'"{yaml.safe_load(before)["sleef_commit"][0]}"',
        f'"{standins.sleef}"',
    ]


def test_a_flagtree_cpu_whose_builder_api_no_longer_matches(
    feedstock: Path, standins: Standins, capsys
) -> None:
    status, document = report(
        feedstock, standins, capsys, "--to", "only-flagtree", "--flagtree-cpu-src", str(standins.cpu_mismatch)
    )
    assert status == 11
    found = {c["name"]: c["summary"] for c in document["checks"] if c["status"] == "fail"}
    assert set(found) == {"builder-methods", "builtin-keyword", "tritoncpu-ops"}
    assert "calls create_cpu_rms_norm with 6 arguments; tle_arm64 takes 5" in found["builder-methods"]
    assert (
        "FlagTree's builtins take _builder; in tle_ops.py rms_norm takes _semantic"
        in found["builtin-keyword"]
    )
    assert found["tritoncpu-ops"] == (
        "cpu::RmsNormOp takes 6 arguments in TritonCPUOps.td; create_cpu_rms_norm passes 5"
    )
    assert document["written"] == []


def test_without_flagtree_cpu_its_side_of_the_api_must_be_the_pins(
    feedstock: Path, standins: Standins, capsys
) -> None:
    status, document = report(feedstock, standins, capsys, "--to", "api")
    assert status == 11
    (failed,) = [c for c in document["checks"] if c["status"] == "fail"]
    assert failed["name"] == "builder-methods"
    assert failed["summary"].startswith("tle_arm64's 2 create_cpu_* methods changed since")
    assert failed["details"] == [
        "create_cpu_rms_norm: 5 arguments, creates RmsNormOp -> 6 arguments, creates RmsNormOp"
    ]


def test_without_flagtree_cpu_the_links_must_be_the_pins(feedstock: Path, standins: Standins, capsys) -> None:
    status, document = report(feedstock, standins, capsys, "--to", "links")
    assert status == 11
    (failed,) = [c for c in document["checks"] if c["status"] == "fail"]
    assert failed["name"] == "link-script"
    assert failed["details"] == ["+ third_party/cpu/bin|../triton-cpu/third_party/cpu/bin"]
    # With flagtree-cpu, the new link's target is looked for there.
    status, document = report(
        feedstock, standins, capsys, "--to", "links", "--flagtree-cpu-src", str(standins.cpu_fits)
    )
    (failed,) = [c for c in document["checks"] if c["status"] == "fail"]
    assert failed["summary"].startswith(
        "1 link target does not exist: third_party/cpu/bin -> third_party/cpu/bin"
    )


def test_an_older_commit_is_refused(feedstock: Path, standins: Standins, capsys) -> None:
    status, document = report(feedstock, standins, capsys, "--to", OLDER_TAG)
    assert status == 11
    failed = {c["name"]: c["summary"] for c in document["checks"] if c["status"] == "fail"}
    assert failed["version"] == "0.5.0 (tag 0.5.0+aipu3.3) does not sort after 0.6.0"
    assert failed["patches-flagtree"].startswith(
        "0001-Make-the-backend-symlinks-that-setup.py-creates-rela.patch: "
    )


# ---- the output and the bad inputs ---------------------------------------------------------------------------


def test_summary_is_markdown_with_both_tables(
    feedstock: Path, standins: Standins, tmp_path: Path, capsys
) -> None:
    summary = tmp_path / "summary.md"
    assert run(feedstock, standins, "--to", "only-flagtree", "--dry-run", "--summary", str(summary)) == 0
    text = summary.read_text()
    assert "| pin | now | bumped | from |" in text
    assert "| flagtree_version | `0.6.0` | `0.6.0.post1` | nearest release tag |" in text
    assert (
        "| patches-flagtree | ok | 12 patches applied in recipe order with GNU patch -F0, no offset |" in text
    )
    assert text.rstrip().endswith("dry run: nothing written (the bump would write 1 file)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to", "nosuchbranch"], "nosuchbranch is not a commit of"),
        (["--llvm-sha256", "XYZ"], "--llvm-sha256 XYZ is not a sha256"),
        (
            ["--llvm-sha256", "a" * 63],
            f"--llvm-sha256 {'a' * 63} is not a sha256 (64 lowercase hex digits): it has 63 hex digits (fix: ",
        ),
        (["--llvm-sha256", "A" * 64], "it has upper-case letters (write it in lower case)"),
        (["--llvm-sha256", "ab" * 32, "--llvm-archive", "x.tar.gz"], "--llvm-sha256 and --llvm-archive both"),
        (["--to", "only-flagtree", "--llvm-sha256", "ab" * 32], "llvm_commit does not move"),
    ],
)
def test_bad_input_is_one_line(
    feedstock: Path, standins: Standins, capsys, args: list[str], message: str
) -> None:
    assert run(feedstock, standins, *args) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error and "(fix: " in error


def test_a_folder_that_is_no_git_clone_is_refused(
    feedstock: Path, standins: Standins, tmp_path: Path, capsys
) -> None:
    (tmp_path / "plain").mkdir()
    # A plain folder, and a folder inside a clone (git would read the clone around it).
    for folder in (tmp_path / "plain", standins.flagtree / "python"):
        args = ["bump", "--recipe-dir", str(feedstock / "recipe"), "--flagtree-src", str(folder)]
        assert main(args) == 2
        assert f"--flagtree-src {folder} is not a git repository" in capsys.readouterr().err


def test_a_patch_the_recipe_lists_must_exist(feedstock: Path, standins: Standins, capsys) -> None:
    (gone,) = (feedstock / "patches" / "flagtree").glob("0004-*.patch")
    gone.unlink()
    status, document = report(feedstock, standins, capsys, "--to", "only-flagtree")
    assert status == 11
    (failed,) = [c for c in document["checks"] if c["status"] == "fail"]
    assert failed["summary"] == f"recipe.yaml lists {gone}, which does not exist"


def test_a_failed_staging_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.patch"
    first.write_text("old a\n")
    second.write_text("old b\n")
    real = pins_module.tempfile.mkstemp
    calls = []

    def failing(*args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(pins_module.tempfile, "mkstemp", failing)
    with pytest.raises(pins_module.FilesNotWritten, match="disk full") as raised:
        pins_module.write_atomically({first: "new a\n", second: "new b\n"})
    assert (raised.value.failed, raised.value.put_back, raised.value.written) == (second, (), ())
    assert (first.read_text(), second.read_text()) == ("old a\n", "old b\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.patch"]


def test_a_failed_move_puts_back_the_files_already_moved(tmp_path: Path) -> None:
    """The third target cannot be replaced (a folder stands where the file goes: the rename fails, EISDIR),
    after the first two were: they get their old files back, the very files (same inode), not copies."""
    first, second, third = tmp_path / "a.yaml", tmp_path / "b.patch", tmp_path / "c.patch"
    first.write_text("old a\n")
    second.write_text("old b\n")
    third.mkdir()
    inodes = (first.stat().st_ino, second.stat().st_ino)
    with pytest.raises(pins_module.FilesNotWritten) as raised:
        pins_module.write_atomically({first: "new a\n", second: "new b\n", third: "new c\n"})
    assert (raised.value.failed, raised.value.put_back, raised.value.written) == (third, (first, second), ())
    assert raised.value.return_code == 10
    assert (first.read_text(), second.read_text()) == ("old a\n", "old b\n")
    assert (first.stat().st_ino, second.stat().st_ino) == inodes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.patch", "c.patch"]


def _files(feedstock: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(feedstock)): p.read_bytes() for p in sorted(feedstock.rglob("*")) if p.is_file()
    }


def test_a_refused_write_of_the_third_file_writes_nothing_and_says_so(
    feedstock: Path, standins: Standins
) -> None:
    """`--to refresh` writes the pins, then patches 0003 and 0004. The third cannot be replaced: bind-mounted on
    itself (as a container mounts a single file), it refuses a rename over it with EBUSY, after the first two
    moved. They are put back; the report still prints its tables, with what was and was not written; one
    error line; exit status 10."""
    (third,) = (feedstock / "patches" / "flagtree").glob("0004-*.patch")
    (second,) = (feedstock / "patches" / "flagtree").glob("0003-*.patch")
    variant = feedstock / VARIANT
    before = _files(feedstock)
    argv = [
        str(Path(sys.executable).parent / "flagtree-feedstock"),
        "bump",
        "--recipe-dir",
        str(feedstock / "recipe"),
    ]
    argv += ["--flagtree-src", str(standins.flagtree), "--to", "refresh"]
    done = subprocess.run(
        with_file_mounted_on_itself(third, argv),
        capture_output=True,
        text=True,
        check=False,
        timeout=seconds(300),
    )
    assert done.returncode == 10, done.stdout + done.stderr
    assert done.stderr == (
        f"flagtree-feedstock: error: {third} could not be written (Device or resource busy): nothing written "
        f"({variant}, {second} put back as before) (fix: check that path)\n"
    )
    assert _files(feedstock) == before  # every byte as it was; nothing staged or kept left beside them
    rows = [line for line in done.stdout.splitlines() if line.startswith("│ ")]
    assert any(row.startswith("│ patches-flagtree ") and "refresh" in row for row in rows)
    results = {
        path: next(row.split("│")[2].strip() for row in rows if f" {path} " in row)
        for path in (variant, second, third)
    }
    assert results == {
        variant: "not written (put back)",
        second: "not written (put back)",
        third: "not written: Device or resource busy",
    }
    assert done.stdout.rstrip().endswith(
        f"{third} could not be written (Device or resource busy): nothing written, every file as it was"
    )


@pytest.mark.parametrize("bom", ["", "\ufeff"], ids=["crlf", "crlf-and-bom"])
def test_line_endings_and_a_byte_order_mark_are_kept(feedstock: Path, standins: Standins, bom: str) -> None:
    variant = feedstock / VARIANT
    old = (bom + variant.read_text().replace("\n", "\r\n")).encode()
    variant.write_bytes(old)
    assert run(feedstock, standins, "--to", "only-flagtree") == 0
    new = git(standins.flagtree, "rev-parse", "only-flagtree")
    expected = old.replace(f'"{standins.pin}"'.encode(), f'"{new}"'.encode()).replace(
        b'flagtree_version:\r\n  - "0.6.0"\r\n', b'flagtree_version:\r\n  - "0.6.0.post1"\r\n'
    )
    assert expected != old
    assert variant.read_bytes() == expected


def test_a_key_set_twice_is_named_at_both_lines(feedstock: Path, standins: Standins, capsys) -> None:
    variant = feedstock / VARIANT
    text = variant.read_text()
    first = text.splitlines().index("flagtree_commit:") + 1
    variant.write_text(f'{text}flagtree_commit:\n  - "{standins.pin}"\n')
    assert run(feedstock, standins, "--to", "only-flagtree") == 2
    assert capsys.readouterr().err == (
        f"flagtree-feedstock: error: {variant}:{text.count(chr(10)) + 1}: flagtree_commit is set a second time in "
        f"this file (first at line {first}) (fix: keep one flagtree_commit: entry)\n"
    )
    assert variant.read_text() == f'{text}flagtree_commit:\n  - "{standins.pin}"\n'


def test_the_version_check_compares_conda_versions(
    feedstock: Path, standins: Standins, tmp_path: Path, capsys
) -> None:
    """0.6.0.post10 sorts after 0.6.0.post9 as a version, not as a string ("0.6.0.post10" < "0.6.0.post9")."""
    clone = tmp_path / "FlagTree"
    git(tmp_path, "clone", "-q", str(standins.flagtree), str(clone))
    git(clone, "checkout", "-q", "-b", "ten-past", TAG)
    commits = []
    for number in range(1, 11):
        git(clone, "commit", "-q", "--allow-empty", "-m", f"commit {number} past the tag")
        commits.append(git(clone, "rev-parse", "HEAD"))
    assert sorted(["0.6.0.post9", "0.6.0.post10"]) == [
        "0.6.0.post10",
        "0.6.0.post9",
    ]  # this case's string order
    pinned = copy_feedstock(tmp_path / "at-post9", commits[8])
    variant = pinned / VARIANT
    variant.write_text(
        variant.read_text().replace('flagtree_version:\n  - "0.6.0"', 'flagtree_version:\n  - "0.6.0.post9"')
    )
    argv = ["bump", "--recipe-dir", str(pinned / "recipe"), "--flagtree-src", str(clone), "--to", commits[9]]
    assert main([*argv, "--dry-run", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    version = next(c for c in document["checks"] if c["name"] == "version")
    assert (version["status"], version["summary"]) == (
        "ok",
        "0.6.0.post10 (tag 0.6.0+triton3.3 + 10 commits) sorts after 0.6.0.post9",
    )
    assert document["pins"]["flagtree_version"]["new"] == "0.6.0.post10"


def test_change_pins_edits_values_only() -> None:
    text = '# why\nflagtree_commit:\n  - "aaa"  # [linux]\n# other\nllvm_commit:\n  - "bbb"\n'
    new = pins_module.change_pins(text, {"flagtree_commit": "ccc"}, name="x")
    assert new == '# why\nflagtree_commit:\n  - "ccc"  # [linux]\n# other\nllvm_commit:\n  - "bbb"\n'
    with pytest.raises(pins_module.ConfigurationError, match="is not one `sleef_commit:` line"):
        pins_module.change_pins(text, {"sleef_commit": "ddd"}, name="x")


@pytest.mark.parametrize(
    ("tag", "distance", "version"),
    [
        ("0.6.0+triton3.3", 0, "0.6.0"),
        ("0.6.0+triton3.3", 1, "0.6.0.post1"),
        ("0.7.0rc1+aipu3.3", 12, "0.7.0rc1.post12"),
    ],
)
def test_derive_version(tag: str, distance: int, version: str) -> None:
    assert derive_version(tag, distance) == version


def test_derived_versions_sort_after_the_tag_and_before_the_next_release() -> None:
    order = ["0.5.0rc2.post1", "0.6.0", "0.6.0.post1", "0.6.0.post2", "0.6.0.post10", "0.6.1rc1", "0.6.1"]
    assert sorted(order, key=Version) == order
    assert order[1:4] == [derive_version(TAG, n) for n in (0, 1, 2)]
    with pytest.raises(ValueError, match=r"cannot take a \.post3 distance"):
        derive_version("0.5.0rc2.post1+triton3.3", 3)


# ---- FlagTree's real history (FLAGTREE_SRC) -------------------------------------------------------------------


def _flagtree_history() -> Path:
    path = upstream_source("FLAGTREE_SRC")
    value = str(path)
    if subprocess.run(
        ["git", "-C", value, "rev-parse", "--git-dir"], capture_output=True, check=False
    ).returncode:
        pytest.fail(f"FLAGTREE_SRC={value} is not a git clone")
    if _rev(path, "rev-parse", "--is-shallow-repository") == "true":
        reason = (
            f"FLAGTREE_SRC={value} is a shallow clone: these tests need the history of triton_v3.3.x and its "
            "tags (clone FlagTree whole to run them: .ci/sources.py does)"
        )
        if sources_required():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return path


def _pinned() -> str:
    return yaml.safe_load((ROOT / VARIANT).read_text())["flagtree_commit"][0]


def _rev(path: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def test_real_history_the_next_commit_passes_every_check(tmp_path: Path, capsys) -> None:
    flagtree = _flagtree_history()
    pin = _pinned()
    branches = [ref for ref in _rev(flagtree, "for-each-ref", "--format=%(refname)", "--contains", pin).split()
                if ref.endswith("/triton_v3.3.x")]  # fmt: skip
    following = (
        _rev(flagtree, "rev-list", "--reverse", "--ancestry-path", f"{pin}..{branches[0]}")
        if branches
        else ""
    )
    if not following:
        pytest.skip(f"FLAGTREE_SRC={flagtree} holds no commit of triton_v3.3.x after the pin {pin[:8]}")
    following = following.split()[0]
    feedstock = copy_feedstock(tmp_path / "feedstock", pin)
    args = [
        "bump",
        "--recipe-dir",
        str(feedstock / "recipe"),
        "--flagtree-src",
        str(flagtree),
        "--to",
        following,
    ]
    assert main([*args, "--dry-run", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {c["name"]: c["status"] for c in document["checks"] if c["status"] != "skip"} == dict.fromkeys(
        ("version", "llvm-commit", "patches-flagtree", "llvm-libraries", "plain-libraries", "link-script",
         "builtin-keyword", "builder-methods"), "ok"
    )  # fmt: skip
    assert document["pins"]["flagtree_commit"]["new"] == following
    distance = int(_rev(flagtree, "rev-list", "--count", f"{pin}..{following}"))
    assert document["pins"]["flagtree_version"]["new"] == f"0.6.0.post{distance}"


def test_real_history_an_older_commit_without_the_cpu_backend_is_refused(tmp_path: Path, capsys) -> None:
    flagtree = _flagtree_history()
    added = _rev(flagtree, "log", "--diff-filter=A", "--format=%H", _pinned(), "--", "third_party/tle_arm64")
    if not added:
        pytest.skip(
            f"FLAGTREE_SRC={flagtree} lacks the history of the pin (the commit adding the CPU backend)"
        )
    older = _rev(flagtree, "rev-parse", f"{added.split()[-1]}^")
    feedstock = copy_feedstock(tmp_path / "feedstock", _pinned())
    before = (feedstock / VARIANT).read_text()
    args = ["bump", "--recipe-dir", str(feedstock / "recipe"), "--flagtree-src", str(flagtree), "--to", older]
    assert main(args) == 11
    captured = capsys.readouterr()
    patches = next(line for line in captured.out.splitlines() if "patches-flagtree" in line)
    assert "fail" in patches
    assert "0003-Use-the-CPU-build-path-of-_build-when-the-cpu-backen.patch: hunk #1" in patches
    version = next(line for line in captured.out.splitlines() if line.startswith("│ version"))
    assert "fail" in version and "does not sort after" in version
    assert (feedstock / VARIANT).read_text() == before
    assert "(patches-flagtree" in captured.err or "patches-flagtree," in captured.err


def _regenerate_series(read, tmp_path: Path) -> list[tuple[Path, list[str]]]:
    """Each patch of patches/flagtree regenerated from the tree before and after it (``read`` gives the
    upstream files), in recipe order: (patch, its regenerated lines)."""
    work = tmp_path / "work"
    regenerated = []
    for number, patch in enumerate(recipe_series(ROOT / "recipe" / "recipe.yaml")["flagtree"]):
        diff = parse_diff(patch.read_text())
        for path in diff.files:
            if not (work / path).exists() and (data := read(path)) is not None:
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                (work / path).write_bytes(data)
        before, after = tmp_path / f"before-{number}", tmp_path / f"after-{number}"
        shutil.copytree(work, before)
        subprocess.run(["patch", "-p1", "-F0", "--batch", "-s", "-i", str(patch)], cwd=work, check=True)
        shutil.copytree(work, after)
        text = regenerate(patch, patch.read_text(), before, after, diff, tmp_path / f"git-{number}")
        regenerated.append((patch, text.splitlines()))
    return regenerated


def test_patches_regenerate_with_their_header_and_message(tmp_path: Path) -> None:
    """On the synthesized tree: a regenerated patch differs from ours only in the From line's commit id, the
    `index` lines and the function names after a hunk's line numbers (the stand-in's files are not upstream's:
    their lines outside the hunks are blank)."""
    tree = tmp_path / "tree"
    for path, lines in preimages(sorted((ROOT / "patches" / "flagtree").glob("*.patch"))).items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(render_preimage(lines))
    for patch, lines in _regenerate_series(lambda p: (tree / p).read_bytes(), tmp_path):
        original = patch.read_text().splitlines()
        assert len(lines) == len(original), patch.name
        differ = [(a, b) for a, b in zip(original, lines, strict=True) if a != b]
        assert differ[0][0].startswith("From ") and differ[0][1].startswith("From "), patch.name
        for ours, again in differ[1:]:
            if ours.startswith("@@ "):
                assert again.split(" @@")[0] == ours.split(" @@")[0], patch.name
            else:
                assert ours.startswith("index ") and again.startswith("index "), patch.name


def test_real_patches_regenerate_byte_for_byte(tmp_path: Path) -> None:
    """On FlagTree at the pin: a regenerated patch is ours, byte for byte, apart from the From line's commit."""
    flagtree = _flagtree_history()

    def read(path: str) -> bytes | None:
        done = subprocess.run(
            ["git", "-C", str(flagtree), "show", f"{_pinned()}:{path}"], capture_output=True, check=False
        )
        return done.stdout if done.returncode == 0 else None

    for patch, lines in _regenerate_series(read, tmp_path):
        assert lines[1:] == patch.read_text().splitlines()[1:], patch.name
