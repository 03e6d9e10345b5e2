"""The archive route in both recipes: the variant keys llvm_archive_url and llvm_archive_sha256.

Unset (the recipes default them), every package keeps its name: rendered against the same recipe with the
archive route taken out, and (where this clone has the branch) against main's recipe. Set, flagtree-llvm
fetches the archive besides LLVM's source (its licence files), gets a build string of its own, and both
engines hash the archive's sha256 into it and into flagtree-cpu's; recipe.yaml and meta.yaml stay equivalent.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from _recipe_support import PYTHONS, ROOT, TARGET, VARIANT_FILES, first_variant, meta_outputs, render_meta
from flagtree_feedstock.recipe.render import render

ARCHIVE = {
    "llvm_archive_url": "file:///home/user/.triton/llvm/llvm-a66376b0-ubuntu-arm64.tar.gz",
    "llvm_archive_sha256": "0123456789abcdef" * 4,
}
# What the archive route adds to recipe.yaml; taken out, the recipe is the one before the route existed.
_ROUTE_IN_RECIPE_YAML = (
    re.compile(r"^  # Where flagtree-llvm comes from: .*?\n  llvm_archive: .*?\n", re.MULTILINE | re.DOTALL),
    re.compile(
        r"^      # Triton's prebuilt LLVM: .*?target_directory: llvm-archive\n", re.MULTILINE | re.DOTALL
    ),
    re.compile(r'\$\{\{ "_archive" if llvm_archive else "" \}\}'),
    re.compile(r"^          - llvm_archive_url\n", re.MULTILINE),
)

# The same in meta.yaml: the Jinja set, the three `{% if llvm_archive %}` blocks, the build string's suffix.
_ROUTE_IN_META_YAML = (
    re.compile(
        r"^\{# Where flagtree-llvm comes from: .*?#\}\n\{% set llvm_archive = .*?%\}\n",
        re.MULTILINE | re.DOTALL,
    ),
    re.compile(r"^\{% if llvm_archive %\}\n.*?\{% endif %\}\n", re.MULTILINE | re.DOTALL),
    re.compile(r'\{\{ "_archive" if llvm_archive else "" \}\}'),
)


def _without_the_route(recipe_dir: Path, name: str, parts: tuple[re.Pattern[str], ...]) -> None:
    """Remove the archive route from ``recipe_dir/name`` (a copy), each part found first."""
    recipe = recipe_dir / name
    text = recipe.read_text()
    for part in parts:
        assert part.search(text), f"the archive route's part {part.pattern!r} is not in {name}"
        text = part.sub("", text)
    code = re.sub(r"\{#.*?#\}", "", text, flags=re.DOTALL)
    assert [line for line in code.splitlines() if "llvm_archive" in line.partition("#")[0]] == []
    recipe.write_text(text)


def _names(recipe_root: Path, *extra: Path, build: str = TARGET) -> set[tuple[str, str, str]]:
    files = (
        recipe_root / "conda_build_config.yaml",
        recipe_root / "recipe" / "conda_build_config.yaml",
        *extra,
    )
    outputs = render(recipe_root / "recipe" / "recipe.yaml", files, target=TARGET, build=build)  # type: ignore[arg-type]
    return {(o.name, o.version, o.build_string) for o in outputs}


def _copy(destination: Path) -> Path:
    (destination / "recipe").mkdir(parents=True)
    for name in ("recipe.yaml", "meta.yaml", "conda_build_config.yaml"):
        shutil.copy2(ROOT / "recipe" / name, destination / "recipe" / name)
    shutil.copy2(ROOT / "conda_build_config.yaml", destination / "conda_build_config.yaml")
    return destination


def _archive_variants(path: Path) -> Path:
    path.write_text(yaml.safe_dump({key: [value] for key, value in ARCHIVE.items()}))
    return path


@pytest.mark.parametrize("build", [TARGET, "linux-64"])
def test_unset_keys_leave_every_name_as_the_recipe_without_the_route(tmp_path, build):
    without = _copy(tmp_path / "without")
    _without_the_route(without / "recipe", "recipe.yaml", _ROUTE_IN_RECIPE_YAML)
    (
        without / "recipe" / "meta.yaml"
    ).unlink()  # the variant check reads both recipes; this one has the route
    assert _names(without, build=build) == _names(ROOT, build=build)


def test_set_keys_give_flagtree_llvm_a_name_of_its_own(tmp_path):
    plain = {(name, build_string) for name, _, build_string in _names(ROOT)}
    archive = {
        (name, build_string) for name, _, build_string in _names(ROOT, _archive_variants(tmp_path / "a.yaml"))
    }
    commit = first_variant()["llvm_commit"][:8]
    (llvm,) = [b for name, b in archive if name == "flagtree-llvm"]
    assert re.fullmatch(f"llvm{commit}_archive_h[0-9a-f]{{7}}_0", llvm)
    assert not any(b.startswith(f"llvm{commit}_archive") for _, b in plain)
    # flagtree-cpu pins that LLVM exactly, so each of its names changes too; the doctor is not built from it.
    changed = {name for name, build_string in archive if (name, build_string) not in plain}
    assert changed == {"flagtree-llvm", "flagtree-cpu"}


def _by_name(names: set[tuple[str, str, str]]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for name, _, build_string in names:
        found.setdefault(name, set()).add(build_string)
    return found


def test_another_archive_is_another_name_where_it_lies_is_not(tmp_path):
    base = _by_name(_names(ROOT, _archive_variants(tmp_path / "a.yaml")))
    moved = tmp_path / "moved.yaml"
    moved.write_text(
        yaml.safe_dump({**{k: [v] for k, v in ARCHIVE.items()}, "llvm_archive_url": ["https://m/x.tgz"]})
    )
    assert _by_name(_names(ROOT, moved)) == base
    other = tmp_path / "other.yaml"
    other.write_text(
        yaml.safe_dump({**{k: [v] for k, v in ARCHIVE.items()}, "llvm_archive_sha256": ["f" * 64]})
    )
    renamed = _by_name(_names(ROOT, other))
    assert {name for name in base if renamed[name] != base[name]} == {"flagtree-llvm", "flagtree-cpu"}


def _v1(tmp_path: Path, python: str = PYTHONS[0]) -> dict[str, dict]:
    files = (*VARIANT_FILES, _archive_variants(tmp_path / "archive.yaml"))
    return {
        o.name: o.engine_variant.recipe.to_dict()
        for o in render(ROOT / "recipe" / "recipe.yaml", files, target=TARGET, build=TARGET)
        if o.python in (None, python)
    }


def _url_sources(entries: list[dict]) -> list[tuple[str, str, str]]:
    return [
        (str(e["url"]), str(e["sha256"]), str(e.get("target_directory", e.get("folder"))))
        for e in entries
        if "url" in e
    ]


def test_both_recipes_fetch_the_archive_besides_llvm_s_source(tmp_path):
    llvm = _v1(tmp_path)["flagtree-llvm"]
    variant = first_variant()
    github_llvm = (
        f"https://github.com/llvm/llvm-project/archive/{variant['llvm_commit']}.tar.gz",
        variant["llvm_sha256"],
        "llvm-project",
    )
    archive = (ARCHIVE["llvm_archive_url"], ARCHIVE["llvm_archive_sha256"], "llvm-archive")
    assert _url_sources(llvm["source"]) == [github_llvm, archive]
    meta = render_meta(extra=ARCHIVE)
    assert _url_sources(meta["source"]) == [github_llvm, archive]
    assert _url_sources(render_meta()["source"]) == [github_llvm]


def test_both_recipes_keep_the_licence_files_of_llvm_s_source(tmp_path):
    """The archive holds no licence file: both routes ship llvm-project's, at llvm_commit (sha256-pinned)."""
    v1 = _v1(tmp_path)["flagtree-llvm"]["about"]["license_file"]
    meta = meta_outputs()["flagtree-llvm"]["about"]["license_file"]
    archive_meta = {o["name"]: o for o in render_meta(extra=ARCHIVE)["outputs"]}["flagtree-llvm"]["about"]
    assert (
        v1
        == meta
        == archive_meta["license_file"]
        == ["llvm-project/llvm/LICENSE.TXT", "llvm-project/mlir/LICENSE.TXT"]
    )


def test_meta_yaml_hashes_the_archive_only_where_it_is_used():
    """conda-build hashes the keys force_use_keys names; one no variant file sets would be a KeyError there."""
    for extra, hashed in (({}, False), (ARCHIVE, True)):
        outputs = {o["name"]: o for o in render_meta(extra=extra)["outputs"]}
        for name in ("flagtree-llvm", "flagtree-cpu"):
            assert ("llvm_archive_sha256" in outputs[name]["build"]["force_use_keys"]) is hashed, (
                name,
                extra,
            )
        assert "force_use_keys" not in (outputs["flagtree-doctor"].get("build") or {})
    strings = [
        o["build"]["string"] for o in render_meta(extra=ARCHIVE)["outputs"] if o["name"] == "flagtree-llvm"
    ]
    assert strings == [f"llvm{first_variant()['llvm_commit'][:8]}_archive_h{{{{ PKG_HASH }}}}_0"]


def test_the_variant_check_takes_the_keys_and_checks_the_sha256(tmp_path):
    from flagtree_feedstock.errors import ConfigurationError  # noqa: PLC0415

    render(
        ROOT / "recipe" / "recipe.yaml",
        (*VARIANT_FILES, _archive_variants(tmp_path / "ok.yaml")),
        target=TARGET,
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({"llvm_archive_url": ["https://x/y.tar.gz"], "llvm_archive_sha256": ["abc"]})
    )
    with pytest.raises(ConfigurationError, match="llvm_archive_sha256 is 'abc', not a sha256"):
        render(ROOT / "recipe" / "recipe.yaml", (*VARIANT_FILES, bad), target=TARGET)


# --- tier conda_build: the real conda-build's names (skipped where it is not installed) ---


def _conda_build_names(tmp_path: Path, recipe_dir: Path, *extra: Path) -> dict[str, str]:
    """The file name conda-build gives every output (`--output`), by package name (and python, `py310`)."""
    from _conda_tools import run_conda_build  # noqa: PLC0415
    from _stub_channel import make_stub_channel  # noqa: PLC0415

    argv = ["--output", str(recipe_dir), "-m", str(recipe_dir.parent / "conda_build_config.yaml")]
    argv += [arg for path in extra for arg in ("-m", str(path))]
    argv += ["--override-channels", "-c", make_stub_channel(tmp_path / "stubs").as_uri()]
    done = run_conda_build(argv, scratch=tmp_path / "conda")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "non-final" not in done.stderr, done.stderr  # a requirement did not solve: no real hash
    found = {}
    for line in done.stdout.split():
        if line.endswith((".conda", ".tar.bz2")):
            name, _, build = Path(line).name.rsplit("-", 2)
            found[f"{name} {build[:5] if build.startswith('py3') else ''}".strip()] = Path(line).name
    return found


@pytest.mark.conda_build
def test_conda_build_names_unset_as_without_the_route_set_of_their_own(tmp_path):
    unset = _conda_build_names(tmp_path / "unset", ROOT / "recipe")
    archive = _conda_build_names(tmp_path / "set", ROOT / "recipe", _archive_variants(tmp_path / "a.yaml"))
    other = tmp_path / "other.yaml"
    other.write_text(
        yaml.safe_dump({"llvm_archive_url": ["https://m/x.tgz"], "llvm_archive_sha256": ["f" * 64]})
    )
    another = _conda_build_names(tmp_path / "other", ROOT / "recipe", other)
    commit = first_variant()["llvm_commit"][:8]
    llvm = [name for name in archive.values() if name.startswith("flagtree-llvm-")]
    assert len(llvm) == 1 and re.fullmatch(
        rf"flagtree-llvm-0\.6\.0-llvm{commit}_archive_h[0-9a-f]{{7}}_0\.conda", llvm[0]
    )
    for key, name in unset.items():
        assert (archive[key] != name) is (not name.startswith("flagtree-doctor-")), (key, name, archive[key])
        assert (another[key] != archive[key]) is (not name.startswith("flagtree-doctor-")), key
    # Unset, every name is the one of meta.yaml without the route (its hashes are untouched by it).
    # (conda-build reads the whole recipe folder, and the root's variant file beside it.)
    without = tmp_path / "without"
    shutil.copytree(ROOT / "recipe", without / "recipe")
    shutil.copy2(ROOT / "conda_build_config.yaml", without / "conda_build_config.yaml")
    _without_the_route(without / "recipe", "meta.yaml", _ROUTE_IN_META_YAML)
    assert _conda_build_names(tmp_path / "without-names", without / "recipe") == unset
