"""Every source of both recipes is fetched from the `github_url` variant key, and a mirror changes no package.

A user behind a firewall (or the rehearsal tier, with file:// stand-ins) sets `github_url` instead of editing
the recipes; the packages built from a mirror must be the same packages, so the key is no hash input.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from _recipe_support import OUTPUTS, RECIPE_V1, TARGET, VARIANT_FILES, render_meta
from flagtree_feedstock.recipe.render import render

MIRROR = "file:///srv/github-mirror"


def _variants_with_mirror(tmp_path: Path) -> tuple[Path, ...]:
    """The repository's variant files, the recipe's own with github_url pointed at a mirror."""
    global_file, recipe_file = VARIANT_FILES
    variants = yaml.safe_load(recipe_file.read_text())
    variants["github_url"] = [MIRROR]
    path = tmp_path / "conda_build_config.yaml"
    path.write_text(yaml.safe_dump(variants))
    return (global_file, path)


def _locations(entries: list[dict[str, object]]) -> list[str]:
    found = [entry.get("url") or entry.get("git") or entry.get("git_url") for entry in entries]
    return [str(location) for location in found if location]


def test_every_v1_source_comes_from_github_url(tmp_path: Path) -> None:
    rendered = render(RECIPE_V1, _variants_with_mirror(tmp_path), target=TARGET, build=TARGET)
    locations = [
        location
        for output in rendered
        for location in _locations(output.engine_variant.recipe.to_dict().get("source", []))
    ]
    assert locations, "no url or git source rendered"
    assert all(location.startswith(f"{MIRROR}/") for location in locations), locations


def test_every_meta_source_comes_from_github_url(monkeypatch) -> None:
    import _recipe_support  # noqa: PLC0415

    variants = dict(_recipe_support.variants())
    monkeypatch.setattr(_recipe_support, "variants", lambda: {**variants, "github_url": [MIRROR]})
    locations = _locations(render_meta()["source"])
    assert len(locations) == 4
    assert all(location.startswith(f"{MIRROR}/") for location in locations), locations


def test_a_mirror_changes_no_build_string(tmp_path: Path) -> None:
    default = {
        (o.name, o.python): o.build_string
        for o in render(RECIPE_V1, VARIANT_FILES, target=TARGET, build=TARGET)
    }
    mirrored = render(RECIPE_V1, _variants_with_mirror(tmp_path), target=TARGET, build=TARGET)
    assert {(o.name, o.python): o.build_string for o in mirrored} == default
    assert {name for name, _python in default} == set(OUTPUTS)


def test_sources_come_from_github_where_no_variant_file_names_a_mirror() -> None:
    """conda-smithy's rerender keeps no key that enters no hash: the .ci_support files have no github_url."""
    assert "\ngithub_url:" not in "".join(path.read_text() for path in VARIANT_FILES)
    rendered = render(RECIPE_V1, VARIANT_FILES, target=TARGET, build=TARGET)
    locations = [
        location
        for output in rendered
        for location in _locations(output.engine_variant.recipe.to_dict().get("source", []))
    ]
    assert locations
    assert all(location.startswith("https://github.com/") for location in locations), locations
    meta_locations = _locations(render_meta()["source"])
    assert len(meta_locations) == 4
    assert all(location.startswith("https://github.com/") for location in meta_locations), meta_locations
