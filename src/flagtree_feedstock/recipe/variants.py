"""The variant files, bounded and checked before the engine renders anything, and merged for it.

The files are read in this order, as conda-build reads them, later files winning: the root ones (the
repository's ``conda_build_config.yaml``: what conda-forge's global pinning supplies; each
``--exclusive-config-file`` names another in its place, as conda-build's repeatable ``-e`` does), the recipe
folder's own ``conda_build_config.yaml`` (the feedstock's pins), then each ``--variant-config`` file, added over
them as conda-build's and rattler-build's ``-m`` add: a file holding only ``python`` or only a pin changes that
key alone. A file named twice counts once, at its last place.

Each file is untrusted input: a regular file, bounded in size and depth, without NUL bytes, read once
(:func:`read_variant_text`). The check knows which keys the recipes use: the variables of ``recipe.yaml`` and
``meta.yaml`` (jinja2's parser over their expressions), the keys ``compiler()``/``stdlib()`` read, and the names
of build and host requirements (a variant key of that name pins the requirement). Other keys are ignored, as
conda-build ignores them (``strict``: refused); every variable no engine defines must be set, unless the recipes
read it only as ``name | default(...)``; a ``python`` host requirement needs a non-empty ``python`` list; a
``*_commit`` is a full git commit and a ``*_sha256`` a sha256; no value holds a line break. Each problem is one
line naming the file, the line and the key, raised as one :class:`ConfigurationError`. :func:`merge_variants`
then merges the files as conda-build does, into the one variant the engine sees.
"""

from __future__ import annotations

import difflib
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flagtree_feedstock._own_files import RECIPE, VARIANT, decode_utf8, read_own, read_own_text, repository_of
from flagtree_feedstock.errors import ConfigurationError

VARIANT_FILE = "conda_build_config.yaml"

# Keys that shape the variant matrix rather than name a variable.
_STRUCTURE_KEYS = frozenset({"zip_keys", "pin_run_as_build"})

# Names rattler-build (recipe.yaml) or conda-build (meta.yaml) define themselves: functions, platform
# selectors, build variables. A recipe may use them without any variant file setting them.
_ENGINE_NAMES = frozenset(
    {
        # functions and objects of both engines' jinja
        "compiler", "stdlib", "cdt", "pin_subpackage", "pin_compatible", "match", "env", "environ", "os",
        "load_file_regex", "load_setup_py_data", "load_file_data", "datetime", "is_linux", "is_osx", "is_win",
        "is_unix",
        # platforms and selectors
        "target_platform", "build_platform", "host_platform", "linux", "osx", "win", "unix", "aarch64",
        "arm64", "x86_64", "x86", "ppc64le", "s390x", "linux64", "armv7l", "riscv64",
        # build variables
        "hash", "PKG_HASH", "PKG_NAME", "PKG_VERSION", "PKG_BUILDNUM", "PYTHON", "RECIPE_DIR", "SRC_DIR",
        "PREFIX", "CONDA_PY", "PY_VER",
    }
)  # fmt: skip
_COMPILER_CALL = re.compile(r"\b(compiler|stdlib)\(\s*['\"](\w+)['\"]\s*\)")
_HEX = {"_commit": (40, "a full git commit (40 hex digits)"), "_sha256": (64, "a sha256 (64 hex digits)")}
# Keys whose entries are python versions, as conda-forge writes them: "3.12", or "3.12.* *_cpython" (a version
# and a build string glob).
_PYTHON_KEYS = frozenset({"python", "python_min"})
_PYTHON_VERSION = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?(\.\*)?( +[^ ]+)?")


def variant_files(
    recipe_dir: Path, root_files: Sequence[Path], added: Sequence[Path] = ()
) -> tuple[Path, ...]:
    """The variant files a build reads, in conda-build's order: the ``root_files`` (``-e``, in the order given),
    ``recipe_dir``'s own one when it exists, then the ``added`` ones (``-m``); a file named twice is read once,
    at its last place, as conda-build reads it."""
    own = recipe_dir / VARIANT_FILE
    # There (a FIFO, a link to /dev/zero too): then read_variant_text refuses it, rather than the build skip it.
    given = [*root_files, *((own,) if os.path.lexists(own) else ()), *added]
    return tuple(
        path
        for index, path in enumerate(given)
        if not any(_same(path, later) for later in given[index + 1 :])
    )


def _same(one: Path, other: Path) -> bool:
    try:
        return one == other or (one.exists() and other.exists() and one.samefile(other))
    except OSError:  # a loop of links, a name too long: read_variant_file names the path
        return False


@dataclass(frozen=True, kw_only=True)
class RecipeKeys:
    """What the recipes in one folder read from the variant files."""

    recipes: tuple[Path, ...]
    # Keys a variant file may set.
    used: frozenset[str]
    # Variables the recipes read that no engine and no context defines: a variant file must set them.
    needed: frozenset[str]
    # A bare `python` host requirement: the python matrix comes from the `python` key.
    python_matrix: bool


def recipe_keys(recipe_dir: Path) -> RecipeKeys:
    """The variant keys ``recipe_dir``'s ``recipe.yaml`` and ``meta.yaml`` use (either may be absent)."""
    import jinja2  # noqa: PLC0415 - only a build needs it
    import jinja2.meta  # noqa: PLC0415 - find_undeclared_variables

    names: set[str] = set()
    mandatory: set[str] = set()
    requirements: set[str] = set()
    texts = recipe_texts(recipe_dir)
    for recipe, text in texts.items():
        v1 = recipe.name == "recipe.yaml"
        if v1:
            found, requirements = _v1_names(text, jinja2)
        else:
            found = _template_names(text, _environment(jinja2, v1=False), jinja2)
        names |= found
        mandatory |= found - _defaulted_names(text, _environment(jinja2, v1=v1), jinja2)
    implied = {
        f"{lang}_{kind}{suffix}"
        for text in texts.values()
        for kind, lang in _COMPILER_CALL.findall(text)
        for suffix in ("", "_version")
    }
    return RecipeKeys(
        recipes=tuple(texts),
        used=frozenset((names - _ENGINE_NAMES) | implied | requirements | _STRUCTURE_KEYS),
        needed=frozenset(mandatory - _ENGINE_NAMES),
        python_matrix="python" in requirements,
    )


def recipe_texts(recipe_dir: Path) -> dict[Path, str]:
    """The text of each of ``recipe_dir``'s ``recipe.yaml`` and ``meta.yaml`` that is there (a name that is
    there but no regular file inside the repository is refused, not skipped), each read once through
    :func:`~flagtree_feedstock._own_files.read_own`."""
    repository = repository_of(recipe_dir)
    return {
        recipe: read_own_text(recipe, RECIPE, inside=repository)
        for recipe in (recipe_dir / "recipe.yaml", recipe_dir / "meta.yaml")
        if os.path.lexists(recipe)
    }


def _defaulted_names(text: str, environment: Any, jinja2: Any) -> set[str]:  # noqa: ANN401 - the jinja2 module and its Environment, imported lazily (the [build] extra)
    """Variables a recipe reads only as ``name | default(...)``: a variant file may set them, none must."""
    try:
        tree = environment.parse(text)
    except jinja2.TemplateSyntaxError:
        return set()
    loads = Counter(n.name for n in tree.find_all(jinja2.nodes.Name) if n.ctx == "load")
    defaulted = Counter(
        f.node.name
        for f in tree.find_all(jinja2.nodes.Filter)
        if f.name == "default" and isinstance(f.node, jinja2.nodes.Name)
    )
    return {name for name, count in defaulted.items() if loads[name] == count}


def template_variables(template: str) -> frozenset[str]:
    """The variables a recipe.yaml template (``${{ ... }}``) reads that no engine defines."""
    import jinja2  # noqa: PLC0415 - Jinja2 is the [build] extra's: only a render needs it
    import jinja2.meta  # noqa: PLC0415 - as jinja2 above

    return frozenset(_template_names(template, _environment(jinja2, v1=True), jinja2) - _ENGINE_NAMES)


def _environment(jinja2: Any, *, v1: bool) -> Any:  # noqa: ANN401 - the jinja2 module and its Environment
    """jinja2 with rattler-build's `${{ }}` (v1) or conda-build's `{{ }}`; v1 has no blocks or comments."""
    if not v1:
        return jinja2.Environment()
    never = "\x00"  # shell's `${#x}` and `{%` are not jinja in a v1 recipe
    return jinja2.Environment(
        variable_start_string="${{",
        variable_end_string="}}",
        block_start_string=never + "{%",
        block_end_string="%}" + never,
        comment_start_string=never + "{#",
        comment_end_string="#}" + never,
    )


def _template_names(text: str, environment: Any, jinja2: Any) -> set[str]:  # noqa: ANN401 - the jinja2 module and its Environment, imported lazily (the [build] extra)
    try:
        tree = environment.parse(text)
    except jinja2.TemplateSyntaxError:
        return set()  # the engine reports the recipe's syntax error, with its line
    try:
        return set(jinja2.meta.find_undeclared_variables(tree))
    except jinja2.TemplateAssertionError:  # e.g. a filter jinja2 lacks: the names read, minus those set
        nodes = list(tree.find_all(jinja2.nodes.Name))
        return {n.name for n in nodes if n.ctx == "load"} - {n.name for n in nodes if n.ctx == "store"}


def _v1_names(text: str, jinja2: Any) -> tuple[set[str], set[str]]:  # noqa: ANN401 - the jinja2 module and its Environment, imported lazily (the [build] extra)
    """(variables of recipe.yaml's expressions minus its context, names of its build/host requirements)."""
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return set(), set()  # the engine reports the recipe's YAML error, with its line
    if not isinstance(data, dict):
        return set(), set()
    environment = _environment(jinja2, v1=True)
    names: set[str] = set()
    requirements: set[str] = set()

    def expression(value: object) -> None:
        if isinstance(value, str):
            names.update(_template_names("${{ " + value + " }}", environment, jinja2))

    def walk(node: object, key: object = None) -> None:
        if isinstance(node, dict):
            for child_key, value in node.items():
                if child_key == "if":
                    expression(value)
                elif child_key == "skip":
                    for item in value if isinstance(value, list) else [value]:
                        expression(item)
                if key == "requirements" and child_key in ("build", "host"):
                    requirements.update(requirement_names(value))
                walk(value, child_key)
        elif isinstance(node, list):
            for item in node:
                walk(item, key)
        elif isinstance(node, str) and "${{" in node:
            names.update(_template_names(node, environment, jinja2))

    walk(data)
    context = data.get("context")
    return names - set(context if isinstance(context, dict) else ()), requirements


def requirement_strings(entries: object) -> Iterator[str]:
    """The requirement strings of a recipe.yaml list, through `if:`/`then:`/`else:`."""
    if isinstance(entries, dict):
        for branch in ("then", "else"):
            yield from requirement_strings(entries.get(branch))
    elif isinstance(entries, list):
        for entry in entries:
            yield from requirement_strings(entry)
    elif isinstance(entries, str) and entries.strip():
        yield entries.strip()


def requirement_names(entries: object) -> Iterator[str]:
    """Package names of a requirement list, through `if:`/`then:`/`else:`; templated entries are skipped."""
    for entry in requirement_strings(entries):
        name = entry.split()[0]
        if "${{" not in name:
            yield name


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One key of one variant file: where it is and its values, as YAML reads them (selectors are comments)."""

    file: Path
    line: int
    values: tuple[tuple[object, int], ...]  # (value, line) of each list item; a value is None unless scalar
    is_list: bool
    # Each value as a message shows it: quoted text, `~ (no value)`, `a list`, `a mapping`.
    shown: tuple[str, ...] = ()


# The depth of a variant file, checked before YAML or the engine reads it (its size: _own_files.VARIANT):
# conda-forge's whole global pinning is 4 levels deep; a deeper file is refused, not parsed (issue 28 item 7).
MAX_VARIANT_DEPTH = 16
# The longest value: a sha256 is 64 characters, a python entry 20; a value of a megabyte costs the render seconds.
MAX_VALUE_CHARS = 256
# A value holding a line break would split the lines of the engine's build scripts and of `--render-only`.
_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def check_variant_files(
    files: Sequence[Path],
    keys: RecipeKeys,
    *,
    texts: Mapping[Path, str],
    strict: bool = False,
    known: frozenset[str] = frozenset(),
) -> tuple[str, ...]:
    """Raise one :class:`ConfigurationError` listing every problem of ``files`` for recipes using ``keys``.

    Keys the recipes do not use are returned, sorted: conda-build ignores them (conda-forge's global pinning
    sets hundreds), and so does the render; with ``strict`` they are problems, with no "did you mean" for a
    key of the global pinning (``known``: :func:`pinning_keys`). ``texts`` holds each file's text, read by
    :func:`read_variant_text`.
    """
    entries: dict[str, list[Entry]] = {}
    for path in files:
        for name, entry in parse_variant_text(path, texts[path]).items():
            entries.setdefault(name, []).append(entry)
    unknown = [*_unknown(entries, keys, known)]
    used = {name: found for name, found in entries.items() if name in keys.used}  # the others are not read
    problems = [*(unknown if strict else ()), *_missing(entries, keys, files), *_values(used)]
    if problems:
        raise ConfigurationError("; ".join(str(p) for p in problems))
    return tuple(sorted(name for name in entries if name not in keys.used))


def read_variant_file(path: Path, *, recipe_dir: Path | None = None) -> dict[str, Entry]:
    """Each key of the variant file ``path`` with its line and values; a problem of the file as a whole (not
    there, not a regular file, too large or too deep, not UTF-8, not YAML, not a mapping, a key set twice) is
    one :class:`ConfigurationError` naming it (``recipe_dir``: as for :func:`read_variant_text`)."""
    return parse_variant_text(path, read_variant_text(path, recipe_dir=recipe_dir))


def read_variant_text(path: Path, *, recipe_dir: Path | None = None) -> str:
    """The text of the variant file ``path``, read by :func:`~flagtree_feedstock._own_files.read_own` (a
    regular file of at most 256 KiB, read once, without blocking on a pipe), UTF-8, without NUL bytes, nested at
    most :data:`MAX_VARIANT_DEPTH` deep; anything else is one :class:`ConfigurationError` naming the file.

    The variant file of the recipe folder ``recipe_dir`` is a file of the repository, which may not lead out of
    it; the others (``-e``, ``-m``, the root one in the current folder) are the user's to name.
    """
    own = recipe_dir is not None and path == recipe_dir / VARIANT_FILE
    data = read_own(path, VARIANT, inside=repository_of(recipe_dir) if own and recipe_dir else None).data
    nul = data.find(b"\0")
    if nul >= 0:
        line = data[:nul].count(b"\n") + 1
        raise ConfigurationError(
            f"variant file {path} holds a NUL byte at offset {nul} (line {line})",
            fix=f"save {path.name} as UTF-8 text",
        )
    text = decode_utf8(path, data, VARIANT.name)
    _check_depth(path, text)
    return text


def _check_depth(path: Path, text: str) -> None:
    """Refuse YAML nested deeper than :data:`MAX_VARIANT_DEPTH`, before a recursive reader sees it."""
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_VARIANT_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else 0
                    raise ConfigurationError(
                        f"variant file {path} is nested deeper than {MAX_VARIANT_DEPTH} levels at line {line}",
                        fix="a variant file maps keys to lists of values: correct the YAML there",
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return  # parse_variant_text reports it, with its line


def parse_variant_text(path: Path, text: str) -> dict[str, Entry]:
    """Each key of the variant file ``path`` (whose text is ``text``) with its line and values."""
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigurationError(
            f"variant file {path} is not a valid conda_build_config.yaml: {exc.problem or exc.context}{where}",
            fix="correct the YAML (every key maps to a list of values)",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(
            f"variant file {path} is not a valid conda_build_config.yaml: {str(exc).splitlines()[0]}",
            fix="correct the YAML (every key maps to a list of values)",
        ) from None
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise ConfigurationError(
            f"variant file {path} is not a valid conda_build_config.yaml: it is not a mapping of keys",
            fix="correct the YAML (every key maps to a list of values)",
        )
    entries: dict[str, Entry] = {}
    for key_node, value_node in root.value:
        items = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        name, line = str(key_node.value), key_node.start_mark.line + 1
        if name in entries:
            # The engines disagree (rattler-build refuses it, at a line of its own count; PyYAML keeps the
            # last), so it is refused here, at both lines.
            raise ConfigurationError(
                f"{path}:{line}: {name} is set a second time in this file (first at line {entries[name].line})",
                fix=f"keep one {name}: entry",
            )
        entries[name] = Entry(
            file=path,
            line=line,
            values=tuple((_scalar(item), item.start_mark.line + 1) for item in items),
            is_list=isinstance(value_node, yaml.SequenceNode),
            shown=tuple(_shown(item) for item in items),
        )
    return entries


_NULL_TAG = "tag:yaml.org,2002:null"


def _scalar(node: Any) -> object:  # noqa: ANN401 - a yaml.Node
    """A scalar's text; None for anything else, YAML's null (``~``, ``null``, nothing) included."""
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    return node.value if isinstance(node, yaml.ScalarNode) and node.tag != _NULL_TAG else None


def _shown(node: Any) -> str:  # noqa: ANN401 - a yaml.Node
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    return f"{node.value or '~'} (no value)" if node.tag == _NULL_TAG else repr(node.value)


def _recipes(keys: RecipeKeys) -> tuple[str, bool]:
    """The recipes' names for a message, and whether they are several (for the verb)."""
    return " and ".join(str(r) for r in keys.recipes) or "the recipes", len(keys.recipes) != 1


def _meant(name: str, keys: RecipeKeys, known: frozenset[str], cutoff: float) -> str | None:
    """The key the recipes use that ``name`` looks like a misspelling of; none for a key of the global
    pinning (``known``: conda-forge's ``gxx_compiler`` is its own key, not a misspelt ``cxx_compiler``)."""
    if name in known:
        return None
    close = difflib.get_close_matches(name, sorted(keys.used - _STRUCTURE_KEYS), n=1, cutoff=cutoff)
    return close[0] if close else None


def pinning_keys(root_files: Sequence[Path], texts: Mapping[Path, str]) -> frozenset[str]:
    """The keys the root variant files (``-e``: conda-forge's global pinning, or the repository's part of it)
    set: keys of the global pinning, known whatever the recipes use (``texts``: each file's text, read)."""
    return frozenset(
        name for path in root_files if path in texts for name in parse_variant_text(path, texts[path])
    )


def _unknown(
    entries: Mapping[str, list[Entry]], keys: RecipeKeys, known: frozenset[str]
) -> Iterator[ConfigurationError]:
    recipes, several = _recipes(keys)
    for name, found in entries.items():
        if name in keys.used:
            continue
        meant = _meant(name, keys, known, 0.75)
        fix = (
            f"did you mean {meant}, which {recipes} {'use' if several else 'uses'}?"
            if meant
            else f"remove it: {recipes} {'do' if several else 'does'} not use it"
        )
        for entry in found:
            yield ConfigurationError(f"{entry.file}:{entry.line}: unknown variant key {name}", fix=fix)


def ignored_note(
    ignored: Sequence[str], keys: RecipeKeys, most: int = 5, *, known: frozenset[str] = frozenset()
) -> str:
    """One line for the keys the render ignores: how many, the first few, and any that look misspelt (never a
    key of the global pinning, ``known``: :func:`pinning_keys`)."""
    shown = [repr(n) if not n.isprintable() else n for n in ignored[:most]]
    more = f" and {len(ignored) - most} more" if len(ignored) > most else ""
    # A misspelling: close, and about as long (conda-forge's cuda_compiler_version is not c_compiler_version).
    near = [
        f"{name}: did you mean {meant}?"
        for name in ignored
        if (meant := _meant(name, keys, known, 0.9)) and abs(len(meant) - len(name)) <= 1  # a letter
    ]
    return (
        f"ignored {len(ignored)} variant key(s) the recipes do not use ({', '.join(shown)}{more})"
        + (f"; {'; '.join(near[:most])}" if near else "")
        + "; --strict refuses them"
    )


def _expected(name: str) -> str:
    for suffix, (_, what) in _HEX.items():
        if name.endswith(suffix):
            return what
    if name == "python":
        return 'a list of python versions, e.g. "3.12.* *_cpython"'
    return "a list of values"


def _missing(
    entries: Mapping[str, list[Entry]], keys: RecipeKeys, files: Sequence[Path]
) -> Iterator[ConfigurationError]:
    recipes, several = _recipes(keys)
    read = " or ".join(str(f) for f in files)
    needed = set(keys.needed) | ({"python"} if keys.python_matrix else set())
    for name in sorted(needed - set(entries)):  # not a version order: variant keys
        yield ConfigurationError(
            f"no variant file sets {name}, which {recipes} {'use' if several else 'uses'}",
            fix=f"add {name} with {_expected(name)} to {read}",
        )


def _values(entries: Mapping[str, list[Entry]]) -> Iterator[ConfigurationError]:
    for entry in entries.get("zip_keys", []):
        # A list of lists of keys, or (as conda-build takes it) one flat list of keys: one group.
        scalars = [line for value, line in entry.values if value is not None]
        if (scalars and len(scalars) != len(entry.values)) or not entry.is_list:
            yield ConfigurationError(
                f"{entry.file}:{scalars[0] if scalars else entry.line}: zip_keys is not a list of lists of keys",
                fix="write each group of zipped keys as a list, e.g. - [c_compiler_version, cxx_compiler_version]",
            )
    for name, found in entries.items():
        if name in _STRUCTURE_KEYS:
            continue
        entry = found[-1]  # the one that wins
        if not entry.is_list or not entry.values:
            shape = "an empty list" if entry.is_list else "not a list"
            what = _expected(name)
            what = what if what.startswith("a list") else f"a list with {what}"
            yield ConfigurationError(
                f"{entry.file}:{entry.line}: {name} is {shape}", fix=f"make {name} {what}"
            )
            continue
        yield from _entry_values(name, entry)


def _entry_values(name: str, entry: Entry) -> Iterator[ConfigurationError]:
    """Each value of a key that is not what the key needs: a pin's hash, a python version, one value."""
    hexes = [(digits, what) for suffix, (digits, what) in _HEX.items() if name.endswith(suffix)]
    for (value, line), shown in zip(entry.values, entry.shown, strict=True):
        for digits, what in hexes:
            if not (isinstance(value, str) and re.fullmatch(f"[0-9a-f]{{{digits}}}", value)):
                reason = near_miss(value, digits)
                yield ConfigurationError(
                    f"{entry.file}:{line}: {name} is {shown}, not {what}" + (f": {reason}" if reason else ""),
                    fix=f"pin {name} to {what}",
                )
        if hexes:
            continue
        if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
            yield ConfigurationError(
                f"{entry.file}:{line}: {name} entry is {len(value)} characters long, more than {MAX_VALUE_CHARS}",
                fix=f"give {name} a value of at most {MAX_VALUE_CHARS} characters",
            )
        elif isinstance(value, str) and _LINE_BREAK.search(value):
            yield ConfigurationError(
                f"{entry.file}:{line}: {name} entry {shown} holds a line break",
                fix=f"write each {name} entry on one line (a YAML | or > block, or \\n in quotes, makes one)",
            )
        elif name in _PYTHON_KEYS:
            if not (isinstance(value, str) and _PYTHON_VERSION.fullmatch(value)):
                yield ConfigurationError(
                    f"{entry.file}:{line}: {name} entry {shown} is not a python version",
                    fix=f'write each {name} entry as a quoted version, "3.12" or "3.12.* *_cpython"',
                )
        elif value is None:
            yield ConfigurationError(
                f"{entry.file}:{line}: {name} has {shown} where a value belongs",
                fix=f"write each {name} entry as one quoted value",
            )


def near_miss(value: object, digits: int) -> str:
    """Why a pin that looks almost right is not: spaces, upper case, the other hash's length, a digit short."""
    if not isinstance(value, str):
        return ""
    if value != value.strip():
        return "it has spaces around it"
    if not re.fullmatch("[0-9a-fA-F]+", value):
        return ""
    if len(value) == digits:
        return "it has upper-case letters (write it in lower case)"
    other = {40: "a git commit", 64: "a sha256"}.get(len(value))
    return f"it has {len(value)} hex digits" + (f", the length of {other}" if other else "")


@dataclass(frozen=True, kw_only=True)
class MergedVariants:
    """The variant files merged as conda-build merges them: what the engine renders, whatever the route."""

    values: Mapping[str, list[object]]
    zip_keys: list[list[str]]
    # The file that set each key (the last one to set it).
    origin: Mapping[str, Path]


# A python entry given as a bare version ("3.12"), read as the matrix entry of that version when an earlier file
# has one ("3.12.* *_cpython"): `-m`, `-e` and `--python` then render one variant, so one build string.
_BARE_VERSION = re.compile(r"[0-9]+\.[0-9]+")


def merge_variants(
    loaded: Sequence[tuple[Path, Mapping[str, list[object]], Sequence[Sequence[str]]]], keys: RecipeKeys
) -> MergedVariants:
    """Merge each file's (values, zip_keys), in order, as conda-build does: a later file's key replaces the
    earlier value; zip_keys groups add up, a later group replacing those it overlaps. Keys the recipes do not
    use are left out, of the values and of the groups, so they can neither change a hash nor break a zip."""
    values: dict[str, list[object]] = {}
    origin: dict[str, Path] = {}
    groups: list[tuple[list[str], Path]] = []
    for path, file_values, file_groups in loaded:
        for name, given in file_values.items():
            if name not in keys.used or name in _STRUCTURE_KEYS:
                continue
            before = values.get(name, []) if name in _PYTHON_KEYS else []
            values[name] = [_matrix_entry(value, before) for value in given]
            origin[name] = path
        for group in file_groups:
            names = list(dict.fromkeys(group))
            groups = [(g, source) for g, source in groups if not set(g) & set(names)]
            groups.append((names, path))
    zipped = []
    for group, source in groups:
        present = [name for name in group if name in values]
        if len(present) < 2:  # a group of one zips nothing
            continue
        lengths = {name: len(values[name]) for name in present}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{name} has {n} (from {origin[name]})" for name, n in lengths.items())
            raise ConfigurationError(
                f"the zip_keys group [{', '.join(present)}] of {source} zips lists of different lengths: {shown}",
                fix="give every key of that group the same number of values, e.g. set them together in one "
                "variant file",
            )
        zipped.append(present)
    return MergedVariants(values=values, zip_keys=zipped, origin=origin)


def _matrix_entry(value: object, before: Sequence[object]) -> object:
    if not (isinstance(value, str) and _BARE_VERSION.fullmatch(value)):
        return value
    same = [
        entry for entry in before if isinstance(entry, str) and entry.split()[0].removesuffix(".*") == value
    ]
    return same[0] if len(same) == 1 else value


def compiler_mismatches(merged: MergedVariants) -> list[str]:
    """A C and a C++ compiler version that would build one package together but differ, one line each."""
    c, cxx = (merged.values.get(f"{lang}_compiler_version") for lang in ("c", "cxx"))
    if not c or not cxx:
        return []
    together = any({"c_compiler_version", "cxx_compiler_version"} <= set(g) for g in merged.zip_keys)
    pairs = zip(c, cxx, strict=True) if together else ((a, b) for a in c for b in cxx)
    names = [str(merged.values.get(f"{lang}_compiler", [lang])[0]) for lang in ("c", "cxx")]
    return [
        f"c_compiler_version {a} (from {merged.origin['c_compiler_version']}) and cxx_compiler_version {b} "
        f"(from {merged.origin['cxx_compiler_version']}) differ: {names[0]} {a} would build the C code and "
        f"{names[1]} {b} the C++ code of one package"
        for a, b in dict.fromkeys(pairs)
        if str(a) != str(b)
    ]


def engine_text(text: str, used: frozenset[str]) -> tuple[str, list[list[str]]]:
    """``text`` (checked by :func:`parse_variant_text`) for the engine's reader: the keys not in ``used`` are
    cut out, whatever their values (the engine's reader refuses a scalar, as in conda-forge's
    ``cdt_arch: armv7l``), and so is a flat ``zip_keys`` list, which that reader refuses too and conda-build
    reads as one group: it is returned as that group."""
    import yaml  # noqa: PLC0415 - PyYAML is the [build] extra's: only the commands that read YAML need it

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if (
        not isinstance(root, yaml.MappingNode) or root.flow_style
    ):  # `{...}` on one line: nothing to cut by lines
        return text, []
    cuts = []
    groups = []
    for key, value in root.value:
        flat = (
            key.value == "zip_keys"
            and isinstance(value, yaml.SequenceNode)
            and all(isinstance(item, yaml.ScalarNode) for item in value.value)
        )
        if flat and value.value:
            groups.append([str(item.value) for item in value.value])
        if flat or (key.value not in used and key.value not in _STRUCTURE_KEYS):
            end = value.end_mark.index
            if value.end_mark.column:  # the rest of the value's last line: its selector comment
                newline = text.find("\n", end)
                end = len(text) if newline < 0 else newline + 1
            cuts.append((key.start_mark.index, end))
    for begin, end in reversed(cuts):
        text = text[:begin] + text[end:]
    return text, groups
