"""The variant files, checked before the engine renders anything.

The files are read in this order, as conda-build reads them, later files winning: the root one (the
repository's ``conda_build_config.yaml``: what conda-forge's global pinning supplies; ``--exclusive-config-file``
names another in its place, as conda-build's ``-e`` does), the recipe folder's own ``conda_build_config.yaml``
(the feedstock's pins), then each ``--variant-config`` file, added over them as conda-build's and
rattler-build's ``-m`` add: a file holding only ``python`` or only a pin changes that key alone.

The check knows which keys the recipes use: the variables of ``recipe.yaml`` and ``meta.yaml`` (jinja2's
parser over their expressions), the keys ``compiler()``/``stdlib()`` read, and the names of build and host
requirements (a variant key of that name pins the requirement). Every key must be one of them; every
variable no engine defines must be set, unless the recipes read it only as ``name | default(...)``; a
``python`` host requirement needs a non-empty ``python`` list; a
``*_commit`` is a full git commit and a ``*_sha256`` a sha256. Each problem is one line naming the file,
the line and the key, raised as one :class:`ConfigurationError`.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
# Where the variant files come from, for a fix that names a file that is not there.
_WHICH_FILES = (
    "--variant-config FILE adds a file; the root conda_build_config.yaml is read from the current folder, "
    "or from --exclusive-config-file FILE"
)
_PYTHON_VERSION = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?(\.\*)?( +[^ ]+)?")


def variant_files(recipe_dir: Path, root_file: Path, added: Sequence[Path] = ()) -> tuple[Path, ...]:
    """The variant files a build reads, in order: ``root_file``, ``recipe_dir``'s own one when it exists, then
    the ``added`` ones; a file named twice is read once, where it first comes."""
    files: list[Path] = []
    own = recipe_dir / VARIANT_FILE
    for path in (root_file, *((own,) if own.is_file() else ()), *added):
        if not any(_same(path, seen) for seen in files):
            files.append(path)
    return tuple(files)


def _same(one: Path, other: Path) -> bool:
    return one == other or (one.exists() and other.exists() and one.samefile(other))


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
    recipes = []
    v1 = recipe_dir / "recipe.yaml"
    if v1.is_file():
        recipes.append(v1)
        text = read_utf8(v1, "recipe")
        found, requirements = _v1_names(text, jinja2)
        names |= found
        mandatory |= found - _defaulted_names(text, _environment(jinja2, v1=True), jinja2)
    meta = recipe_dir / "meta.yaml"
    if meta.is_file():
        recipes.append(meta)
        text = read_utf8(meta, "recipe")
        found = _template_names(text, _environment(jinja2, v1=False), jinja2)
        names |= found
        mandatory |= found - _defaulted_names(text, _environment(jinja2, v1=False), jinja2)
    implied = {f"{lang}_{kind}{suffix}" for kind, lang in _calls(recipes) for suffix in ("", "_version")}
    return RecipeKeys(
        recipes=tuple(recipes),
        used=frozenset((names - _ENGINE_NAMES) | implied | requirements | _STRUCTURE_KEYS),
        needed=frozenset(mandatory - _ENGINE_NAMES),
        python_matrix="python" in requirements,
    )


def _defaulted_names(text: str, environment: Any, jinja2: Any) -> set[str]:  # noqa: ANN401
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
    import jinja2  # noqa: PLC0415
    import jinja2.meta  # noqa: PLC0415

    return frozenset(_template_names(template, _environment(jinja2, v1=True), jinja2) - _ENGINE_NAMES)


def _calls(recipes: Sequence[Path]) -> Iterator[tuple[str, str]]:
    for recipe in recipes:
        yield from _COMPILER_CALL.findall(read_utf8(recipe, "recipe"))


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


def _template_names(text: str, environment: Any, jinja2: Any) -> set[str]:  # noqa: ANN401
    try:
        tree = environment.parse(text)
    except jinja2.TemplateSyntaxError:
        return set()  # the engine reports the recipe's syntax error, with its line
    try:
        return set(jinja2.meta.find_undeclared_variables(tree))
    except jinja2.TemplateAssertionError:  # e.g. a filter jinja2 lacks: the names read, minus those set
        nodes = list(tree.find_all(jinja2.nodes.Name))
        return {n.name for n in nodes if n.ctx == "load"} - {n.name for n in nodes if n.ctx == "store"}


def _v1_names(text: str, jinja2: Any) -> tuple[set[str], set[str]]:  # noqa: ANN401
    """(variables of recipe.yaml's expressions minus its context, names of its build/host requirements)."""
    import yaml  # noqa: PLC0415

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


def check_variant_files(files: Sequence[Path], keys: RecipeKeys) -> None:
    """Raise one :class:`ConfigurationError` listing every problem of ``files`` for recipes using ``keys``."""
    entries: dict[str, list[Entry]] = {}
    for path in files:
        for name, entry in read_variant_file(path).items():
            entries.setdefault(name, []).append(entry)
    problems = [*_unknown(entries, keys), *_missing(entries, keys, files), *_values(entries)]
    if problems:
        raise ConfigurationError("; ".join(str(p) for p in problems))


def read_variant_file(path: Path) -> dict[str, Entry]:
    """Each key of the variant file ``path`` with its line and values; a problem of the file as a whole (not
    there, not UTF-8, not YAML, not a mapping, a key set twice) is one :class:`ConfigurationError` naming it."""
    import yaml  # noqa: PLC0415

    if path.is_dir():
        raise ConfigurationError(
            f"variant file {path} is a folder, not a file",
            fix="pass the path of a conda_build_config.yaml, not of a folder",
        )
    if not path.is_file():
        raise ConfigurationError(
            f"variant file {path} does not exist",
            fix=f"correct the path ({_WHICH_FILES})",
        )
    try:
        root = yaml.compose(read_utf8(path, "variant file"))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigurationError(
            f"variant file {path} is not a valid conda_build_config.yaml: {exc.problem or exc.context}{where}",
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


def read_utf8(path: Path, what: str) -> str:
    """The text of ``path``; bytes that are not UTF-8 are one error naming the file, the offset and the line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigurationError(
            f"{what} {path} is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line})",
            fix=f"save {path.name} as UTF-8 text",
        ) from None


_NULL_TAG = "tag:yaml.org,2002:null"


def _scalar(node: Any) -> object:  # noqa: ANN401 - a yaml.Node
    """A scalar's text; None for anything else, YAML's null (``~``, ``null``, nothing) included."""
    import yaml  # noqa: PLC0415

    return node.value if isinstance(node, yaml.ScalarNode) and node.tag != _NULL_TAG else None


def _shown(node: Any) -> str:  # noqa: ANN401 - a yaml.Node
    import yaml  # noqa: PLC0415

    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    return f"{node.value or '~'} (no value)" if node.tag == _NULL_TAG else repr(node.value)


def _recipes(keys: RecipeKeys) -> tuple[str, bool]:
    """The recipes' names for a message, and whether they are several (for the verb)."""
    return " and ".join(str(r) for r in keys.recipes) or "the recipes", len(keys.recipes) != 1


def _unknown(entries: Mapping[str, list[Entry]], keys: RecipeKeys) -> Iterator[ConfigurationError]:
    recipes, several = _recipes(keys)
    for name, found in entries.items():
        if name in keys.used:
            continue
        close = difflib.get_close_matches(name, sorted(keys.used - _STRUCTURE_KEYS), n=1, cutoff=0.75)
        fix = (
            f"did you mean {close[0]}, which {recipes} {'use' if several else 'uses'}?"
            if close
            else f"remove it: {recipes} {'do' if several else 'does'} not use it"
        )
        for entry in found:
            yield ConfigurationError(f"{entry.file}:{entry.line}: unknown variant key {name}", fix=fix)


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
        scalars = [line for value, line in entry.values if value is not None]
        if scalars or not entry.is_list:
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
        if name in _PYTHON_KEYS:
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
