"""What a conda-forge staged-recipes pull request holds, computed from ``recipe/recipe.yaml``.

``recipes/flagtree-cpu/`` gets ``recipe.yaml`` and every file it references, followed from the recipe itself:
the patches of each source, each output's build script and the files those scripts read from
``${RECIPE_DIR}`` (``for NAME in WORDS`` loops expanded), the test files, and, for a ``path`` source (the
noarch flagtree-doctor is built from this repository), the parts of this repository its script and licence
files name. References outside the recipe folder (``../patches/...``) move inside it and are rewritten. Also
``conda_build_config.yaml`` beside the recipe (the pins conda-forge's global pinning does not supply, or that
differ from it: the root ``conda_build_config.yaml`` holds what it does supply and is left out) and
``conda-forge.yml``, which conda-smithy reads from the recipe folder of a staged-recipes pull request.
Nothing else: not ``meta.yaml`` (staged-recipes builds ``recipe.yaml``), not the toolkit.

The maintainers replace ``extra.recipe-maintainers``: GitHub user names, checked for GitHub's syntax here;
whether each is a user and not an organisation only GitHub can say (conda-smithy's lint asks it).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from flagtree_feedstock._interrupts import deferred_interrupts
from flagtree_feedstock._own_files import (
    PATCH,
    RECIPE,
    RECIPE_FILE,
    SCRIPT,
    SETTINGS,
    VARIANT,
    Kind,
    NotThere,
    OwnFile,
    decode_utf8,
    read_own,
)
from flagtree_feedstock.errors import ConfigurationError

from .engine_inputs import script_files

RECIPE_NAME = "flagtree-cpu"
# GitHub's rule for a user name: letters, digits and single hyphens inside, at most 39 characters.
GITHUB_USER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
RECIPE_DIR_REFERENCE = re.compile(r"\$\{?RECIPE_DIR\}?/([\w.${}/-]+)")
FOR_LOOP = re.compile(r"^\s*for\s+(\w+)\s+in\s+([^;]+);\s*do\b", re.MULTILINE)
VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
MAINTAINERS_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)recipe-maintainers:[ \t]*\n(?:(?P=indent)[ \t]+- .*\n)+", re.MULTILINE
)
SKIPPED_NAMES = ("__pycache__", ".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache")


@dataclass(frozen=True, kw_only=True)
class StagedRecipe:
    """``recipe.yaml`` as the pull request holds it, and every other file by its path in the recipe folder, as
    the one reader read it (its bytes and permission bits: what is written is what was checked)."""

    recipe_text: str
    files: dict[PurePosixPath, OwnFile]


def check_maintainers(handles: Sequence[str]) -> list[str]:
    """The handles as given, each a GitHub user name in form, none twice; one error naming the first bad one."""
    if not handles:
        raise ConfigurationError(
            "staged-recipes needs at least one maintainer", fix="pass --maintainer YOUR_GITHUB_USER"
        )
    for handle in handles:
        if "/" in handle:
            raise ConfigurationError(
                f"--maintainer {handle} is an organisation or team, not a user",
                fix="pass the GitHub user name of each person who will maintain the feedstock",
            )
        if not GITHUB_USER.fullmatch(handle.removeprefix("@")):
            raise ConfigurationError(
                f"--maintainer {handle!r} is not a GitHub user name (letters, digits and single hyphens inside, "
                "at most 39 characters)",
                fix="pass the name as it appears in https://github.com/NAME",
            )
    names = [handle.removeprefix("@") for handle in handles]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ConfigurationError(f"--maintainer {twice[0]} is given twice", fix="give each maintainer once")
    return names


def plan(root: Path, maintainers: Sequence[str]) -> StagedRecipe:
    """The pull request's recipe folder for the repository at ``root`` (``root/recipe/recipe.yaml``)."""
    names = check_maintainers(maintainers)
    recipe_dir = root / "recipe"
    recipe_path = recipe_dir / "recipe.yaml"
    reader = _Reader(root)
    try:
        text = decode_utf8(recipe_path, reader.read(recipe_path, RECIPE).data, RECIPE.name)
        recipe = yaml.safe_load(text)
    except NotThere:
        raise ConfigurationError(
            f"cannot read {recipe_path}: No such file or directory",
            fix="run from the feedstock's root (it holds recipe/), or pass --recipe-dir",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(
            f"cannot read {recipe_path}: {str(exc).splitlines()[0]}",
            fix="run from the feedstock's root (it holds recipe/), or pass --recipe-dir",
        ) from None
    files: dict[PurePosixPath, Path] = {
        PurePosixPath("conda_build_config.yaml"): _existing(
            recipe_dir / "conda_build_config.yaml", "the feedstock's pins"
        ),
        PurePosixPath("conda-forge.yml"): _existing(root / "conda-forge.yml", "conda-smithy's settings"),
    }
    for parts in _sections(recipe):
        for source in _sources(parts):
            text = _source_files(root, recipe_dir, source, parts, text, files)
        for script in [*script_files(parts), *_inline_references(parts, recipe_path)]:
            for relative in _followed(recipe_dir, script, reader):
                files[PurePosixPath(relative)] = recipe_dir / relative
        files.update(_test_files(recipe_dir, parts))
    text = TOOLKIT_CONTEXT.sub("", text)
    # Each file read through the one reader, which refuses a file that is (or lies under) a link out of the
    # repository: its copy would put a file of this machine, not of the repository, into the pull request.
    contents = {relative: reader.read(path, _kind(relative)) for relative, path in files.items()}
    return StagedRecipe(recipe_text=_with_maintainers(text, names, recipe_path), files=contents)


class _Reader:
    """The files of the repository at ``root``, each read once through the one reader."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._read: dict[Path, OwnFile] = {}

    def read(self, path: Path, kind: Kind) -> OwnFile:
        if path not in self._read:
            self._read[path] = read_own(path, kind, inside=self._root)
        return self._read[path]


def _kind(relative: PurePosixPath) -> Kind:
    """The kind of a file of the staged recipe, by its place and name (for its size bound)."""
    if relative.suffix in {".sh", ".bat", ".fish"}:
        return SCRIPT
    if relative.suffix == ".patch":
        return PATCH
    return {"conda_build_config.yaml": VARIANT, "conda-forge.yml": SETTINGS}.get(str(relative), RECIPE_FILE)


def _source_files(  # noqa: PLR0917 - one source of one output, and what it adds to
    root: Path,
    recipe_dir: Path,
    source: dict[str, Any],
    parts: dict[str, Any],
    text: str,
    files: dict[PurePosixPath, Path],
) -> str:
    """Add the files of one source (its patches; a ``path`` source's parts) to ``files``; the recipe rewritten."""
    for patch in source.get("patches") or []:
        destination = _inside(root, recipe_dir, str(patch))
        files[destination] = recipe_dir / str(patch)
        if str(destination) != str(patch):
            text = _rewrite(text, str(patch), str(destination))
    if "path" in source:
        folder = str(source.get("target_directory") or Path(str(source["path"])).name)
        for relative in _named_under(folder, parts):
            for file, inside in _tree(recipe_dir / str(source["path"]) / relative):
                files[PurePosixPath(folder, relative, inside)] = file
        text = _rewrite(text, f"path: {source['path']}", f"path: {folder}")
    return text


def _test_files(recipe_dir: Path, parts: dict[str, Any]) -> dict[PurePosixPath, Path]:
    """The files an output's tests take from the recipe folder (``files: recipe:``, globs allowed)."""
    found: dict[PurePosixPath, Path] = {}
    for test in parts.get("tests") or []:
        patterns = ((test.get("files") or {}).get("recipe") or []) if isinstance(test, dict) else []
        for pattern in patterns:
            matches = sorted(recipe_dir.glob(str(pattern)))
            if not matches:
                raise ConfigurationError(
                    f"the test file {pattern} is not in {recipe_dir}",
                    fix="add it, or drop it from the recipe",
                )
            found.update({PurePosixPath(m.relative_to(recipe_dir).as_posix()): m for m in matches})
    return found


def write(staged: StagedRecipe, output: Path) -> Path:
    """``output/recipes/flagtree-cpu``, made whole in a scratch folder beside it and renamed into place.

    ``output`` is the user's to name, and a link there is followed (it is what they chose, as ``cp`` follows
    it); ``recipes/`` and ``recipes/flagtree-cpu`` come with a clone of staged-recipes, someone else's
    repository, so a link at either is refused before anything is written: nothing is written where it leads.
    """
    target = output / "recipes" / RECIPE_NAME
    for path in (output / "recipes", target):
        if path.is_symlink():
            raise ConfigurationError(
                f"{path} is a symbolic link (to {path.readlink()}): staged-recipes writes only into real "
                "folders of --output, never where a link leads",
                fix="remove the link (a staged-recipes clone has none there), or pass another --output",
            )
    if target.exists():
        raise ConfigurationError(f"{target} already exists", fix="remove it, or pass another --output")
    made = [p for p in (output, output / "recipes") if not p.exists()]
    scratch: Path | None = None
    try:
        # A signal is held from each folder's creation until the cleanup below knows it.
        with deferred_interrupts():
            (output / "recipes").mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=f".{RECIPE_NAME}.", dir=output / "recipes"))
        (scratch / "recipe.yaml").write_text(staged.recipe_text, encoding="utf-8")
        for relative, content in sorted(staged.files.items()):
            destination = scratch / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(content.data)
            destination.chmod(content.mode)
        scratch.chmod(0o755)
        scratch.rename(target)
    except BaseException:
        with deferred_interrupts():
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            for folder in reversed(made):
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
        raise
    return target


def _existing(path: Path, what: str) -> Path:
    """``path``, when there is something by that name: what it is (a FIFO, a link out) the reader judges."""
    if not os.path.lexists(path):
        raise ConfigurationError(f"{path} ({what}) is missing", fix="run from the feedstock's root")
    return path


def _sections(recipe: Any) -> Iterator[dict[str, Any]]:  # noqa: ANN401 - YAML
    """The top level and each output: each may hold source, build, tests and about."""
    if isinstance(recipe, dict):
        yield recipe
        for output in recipe.get("outputs") or []:
            if isinstance(output, dict):
                yield output


def _sources(parts: dict[str, Any]) -> Iterator[dict[str, Any]]:
    entries = parts.get("source") or []
    yield from _branches(entries if isinstance(entries, list) else [entries])


def _branches(entries: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Each mapping of a list, with both sides of every ``if``/``then``/``else``."""
    for entry in entries:
        if isinstance(entry, dict) and "if" in entry:
            for side in ("then", "else"):
                branch = entry.get(side) or []
                yield from _branches(branch if isinstance(branch, list) else [branch])
        elif isinstance(entry, dict):
            yield entry


def _inline_references(parts: dict[str, Any], recipe_path: Path) -> list[str]:
    """What an inline build script (a list of commands, or ``content:``) reads through ``${RECIPE_DIR}``."""
    script = (parts.get("build") or {}).get("script")
    if isinstance(script, dict):
        script = script.get("content")
    if isinstance(script, str):
        script = [] if "\n" not in script and script.endswith((".sh", ".bat")) else [script]
    lines = [str(line) for line in script] if isinstance(script, list) else []
    return list(_recipe_dir_references("\n".join(lines), recipe_path))


def _followed(recipe_dir: Path, script: str, reader: _Reader) -> list[str]:
    """``script`` and every file of the recipe folder it reads through ``${RECIPE_DIR}``, at any depth."""
    found: list[str] = []
    pending = [script]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        path = _existing(recipe_dir / name, "a file the recipe's build scripts read")
        found.append(name)
        if path.suffix == ".sh":
            text = decode_utf8(path, reader.read(path, SCRIPT).data, SCRIPT.name)
            pending.extend(_recipe_dir_references(text, path))
    return found


def _recipe_dir_references(text: str, path: Path) -> Iterator[str]:
    """The ``${RECIPE_DIR}/...`` paths of a shell script (``path``, for messages), each ``${NAME}`` set by a
    ``for`` loop expanded."""
    loops = {name: words.split() for name, words in FOR_LOOP.findall(text)}
    for reference in RECIPE_DIR_REFERENCE.findall(text):
        names = sorted({a or b for a, b in VARIABLE.findall(reference)})
        if unknown := [name for name in names if name not in loops]:
            raise ConfigurationError(
                f"{path} reads ${{RECIPE_DIR}}/{reference}, and ${unknown[0]} is set by no `for` loop there: "
                "cannot tell which files the recipe needs",
                fix="name the file, or loop over its names with `for NAME in ...; do`",
            )
        for values in itertools.product(*(loops[name] for name in names)):
            yield _expanded(reference, dict(zip(names, values, strict=True)))


def _expanded(reference: str, chosen: dict[str, str]) -> str:
    return VARIABLE.sub(lambda m: chosen[m[1] or m[2]], reference)


def _inside(root: Path, recipe_dir: Path, reference: str) -> PurePosixPath:
    """Where a file the recipe names by a relative path goes in the recipe folder (``../x`` -> ``x``)."""
    resolved = Path(os.path.normpath(recipe_dir / reference))
    for base in (recipe_dir, root):
        if resolved.is_relative_to(base):
            _existing(resolved, "a file the recipe names")
            return PurePosixPath(resolved.relative_to(base).as_posix())
    raise ConfigurationError(
        f"the recipe names {reference}, outside this repository", fix="keep every file the recipe names in it"
    )


def _named_under(folder: str, parts: dict[str, Any]) -> list[str]:
    """What an output's script and licence files use of a ``path`` source unpacked at ``folder``."""
    script = (parts.get("build") or {}).get("script")
    lines = [script] if isinstance(script, str) else script if isinstance(script, list) else []
    licences = (parts.get("about") or {}).get("license_file") or []
    words = " ".join([*map(str, lines), *map(str, licences if isinstance(licences, list) else [licences])])
    named = sorted(set(re.findall(rf"(?<![\w./-]){re.escape(folder)}/([\w.-]+)", words)))
    if not named:
        raise ConfigurationError(
            f"the path source unpacked at {folder} is used by no script or licence file",
            fix="drop the source, or use it in the output's script",
        )
    return named


def _tree(path: Path) -> Iterator[tuple[Path, str]]:
    """Each file under ``path`` (or ``path`` itself) with its place below it; caches and metadata left out."""
    if not path.is_dir():
        yield _existing(path, "a file of the path source"), ""
        return
    for file in sorted(path.rglob("*")):
        relative = file.relative_to(path)
        # Every entry but a folder: a FIFO or a link out is the reader's to refuse, not to be left out.
        if not file.is_dir() and not any(
            part in SKIPPED_NAMES or part.endswith(".egg-info") for part in relative.parts
        ):
            yield file, relative.as_posix()


# context.source_date_epoch and its comment: read by this repository's toolkit alone (builder/landing/epoch_rewrite.py),
# which conda-forge's CI does not run; a staged recipe holds nothing feedstock-only.
TOOLKIT_CONTEXT = re.compile(r"(?:^[ ]+#.*\n)*^[ ]+source_date_epoch:.*\n", re.MULTILINE)


def _rewrite(text: str, old: str, new: str) -> str:
    """``text`` with each whole-word ``old`` (a reference of one line) made ``new``."""
    pattern = re.compile(rf"(?<![\w./-]){re.escape(old)}(?![\w./-])")
    if not pattern.search(text) and not re.search(rf"(?<![\w./-]){re.escape(new)}(?![\w./-])", text):
        raise ConfigurationError(
            f"recipe.yaml does not spell {old!r} as the staged recipe must rewrite it",
            fix="write the reference on one line, as `patches:` and `path:` entries are",
        )
    return pattern.sub(lambda _: new, text)


def _with_maintainers(text: str, names: list[str], recipe_path: Path) -> str:
    blocks = list(MAINTAINERS_BLOCK.finditer(text))
    if len(blocks) != 1:
        raise ConfigurationError(
            f"{recipe_path} has no one `recipe-maintainers:` list under extra",
            fix="give extra.recipe-maintainers as a block list",
        )
    indent = blocks[0]["indent"]
    listed = "".join(f"{indent}  - {name}\n" for name in names)
    # The feedstock is named after the recipe (flagtree-cpu-split, a split recipe's name) unless told otherwise.
    named = "" if "feedstock-name:" in text else f"{indent}feedstock-name: {RECIPE_NAME}\n"
    return (
        text[: blocks[0].start()] + f"{named}{indent}recipe-maintainers:\n{listed}" + text[blocks[0].end() :]
    )
