"""Clone the upstream sources the source-backed tests read, at the recipe's pins; print `VARIABLE=path` lines.

The workflow's tests job runs ``python .ci/sources.py DEST >> "$GITHUB_ENV"`` before `.ci/run`. Nothing it
clones is written in the workflow: each ``git`` source of recipe/recipe.yaml whose ``rev`` is a variant key
``<name>_commit`` is fetched from where the recipe fetches it (``${{ github }}``: the recipe's default for
``github_url``, or ``--github-url``), at that key's value in recipe/conda_build_config.yaml, into
``DEST/<name>``, and named by ``<NAME>_SRC`` (flagtree_commit: FLAGTREE_SRC, the variable tests/_tools.py
reads). Each is fetched whole, every branch and tag (the bump's checks on FlagTree's real history look for the
branches that hold the pin and the commits after it; FlagTree's whole history is about 60 MB), and the pinned
commit itself, whether or not a branch still holds it. A fetch that fails, or a checkout at another commit, is
one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipe" / "recipe.yaml"
PINS = ROOT / "recipe" / "conda_build_config.yaml"
_REV = re.compile(r"\$\{\{\s*(?P<key>(?P<name>\w+)_commit)\s*\}\}")
_GITHUB = re.compile(r"\$\{\{\s*github\s*\}\}")
_DEFAULT_HOST = re.compile(r"""github_url\s*\|\s*default\(\s*["'](?P<url>[^"']+)["']\s*\)""")


@dataclass(frozen=True, kw_only=True)
class Source:
    variable: str  # FLAGTREE_SRC
    name: str  # flagtree
    url: str  # as the recipe writes it, ${{ github }}/...
    commit: str


class SourceError(Exception):
    """A source that cannot be read from the recipe or fetched; the message is the one line printed."""


def default_host(recipe: Path = RECIPE) -> str:
    """The host the recipe fetches from when no variant file sets github_url (its context's default)."""
    match = _DEFAULT_HOST.search(str(yaml.safe_load(recipe.read_text())["context"]["github"]))
    if match is None:
        raise SourceError(f"{recipe}: context.github has no github_url default")
    return match["url"]


def pinned_sources(recipe: Path = RECIPE, pins: Path = PINS) -> list[Source]:
    """Every git source of the recipe pinned by a `<name>_commit` variant key, once each, in recipe order."""
    values = yaml.safe_load(pins.read_text())
    found: dict[str, Source] = {}
    for output in yaml.safe_load(recipe.read_text())["outputs"]:
        for entry in output.get("source", []):
            match = _REV.fullmatch(str(entry.get("rev", "")).strip()) if "git" in entry else None
            if match is None:
                continue
            commits = values.get(match["key"])
            if not (isinstance(commits, list) and len(commits) == 1):
                raise SourceError(f"{pins}: {match['key']} is not a list of one commit")
            source = Source(
                variable=f"{match['name'].upper()}_SRC",
                name=match["name"],
                url=str(entry["git"]),
                commit=str(commits[0]),
            )
            found.setdefault(source.variable, source)
    return list(found.values())


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        fatal = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines
        raise SourceError(f"git {' '.join(args)}: {fatal[0]}")
    return done.stdout.strip()


def fetch(source: Source, dest: Path, host: str) -> Path:
    """Check ``source`` out at its commit into ``dest/<name>`` (which must not exist); return the folder."""
    url = _GITHUB.sub(host.rstrip("/"), source.url)
    folder = dest / source.name
    if folder.exists():
        raise SourceError(f"{folder} exists already (remove it, or give another folder)")
    _git("init", "-q", str(folder))
    _git("-C", str(folder), "fetch", "-q", "--tags", url, "+refs/heads/*:refs/remotes/origin/*")
    _git("-C", str(folder), "fetch", "-q", url, source.commit)
    _git("-C", str(folder), "checkout", "-q", "--detach", "FETCH_HEAD")
    head = _git("-C", str(folder), "rev-parse", "HEAD")
    if head != source.commit:
        raise SourceError(f"{url} gave {head}, not {source.commit} ({source.variable})")
    return folder.resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=".ci/sources.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="the folder the checkouts go into, one subfolder each")
    parser.add_argument(
        "--github-url", help="the host to fetch from (default: the recipe's github_url default)"
    )
    args = parser.parse_args(argv)
    try:
        host = args.github_url or default_host()
        lines = [f"{s.variable}={fetch(s, args.dest, host)}" for s in pinned_sources()]
    except SourceError as error:
        print(f".ci/sources.py: error: {error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
