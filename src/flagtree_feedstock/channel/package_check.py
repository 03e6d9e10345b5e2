"""The whole-package check: a package file read whole and safe, named after itself (:func:`check_package`).

Every package the toolkit indexes, installs, uploads or repacks passes here first; a refusal of the reader
(:mod:`.package_reader`) becomes one :class:`flagtree_feedstock.errors.ChannelError` naming the package and
what to do (:func:`refusals`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flagtree_feedstock._foreign_text import FIELD_CHARS, bounded
from flagtree_feedstock.errors import ChannelError

from .package_reader import DamagedPackage, UnsafePackage, load_json, read_package

PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
# The member of a package that names it (name, version, build) and that every index is made from.
INDEX = "info/index.json"
_NAME_MAX = 255  # bytes of one file name, on every file system a channel lives on


def shell_word(path: Path) -> str:
    """``path`` as a shell word, so a suggested command with a space or a quote in a path can be pasted."""
    return shlex.quote(str(path))


@contextmanager
def refusals(path: Path, source: str | None = None) -> Iterator[None]:
    """Turn the reader's refusal of the package ``path`` (downloaded from ``source``, when given) into one
    :class:`ChannelError` naming it, with what to do."""
    where = source or str(path)
    owner = "do not install from this channel; tell its owner"
    try:
        yield
    except UnsafePackage as exc:
        raise ChannelError(
            f"{where} is refused, and was not used: {exc}",
            fix="do not use this package: remove it and get it from its builder again (a conda package holds "
            "relative paths only, within the limits docs/troubleshooting.md lists)"
            if source is None
            else f"{owner} (a conda package holds relative paths only, within the limits docs/troubleshooting.md "
            "lists)",
        ) from None
    except DamagedPackage as exc:
        raise ChannelError(
            f"{where} is damaged ({exc}): it is not a whole conda package",
            fix=f"remove it, then rebuild it (flagtree-feedstock build --output-dir {shell_word(path.parent.parent)}) "
            "or download it again"
            if source is None
            else f"install again later (the download may have been cut); if it stays so, {owner}",
        ) from None


def check_package(path: Path, source: str | None = None, *, shown_as: Path | None = None) -> None:
    """Raise :class:`ChannelError` naming ``path`` (or ``source``, the URL it was downloaded from, or
    ``shown_as``, the file ``path`` is the toolkit's copy of) unless it is a whole conda package named after
    itself.

    Whole and safe: see :func:`package_stem` (a path leading out of the prefix, a bomb or an archive two
    readers read differently is refused, naming the member). Named after itself: ``<name>-<version>-<build>``
    of its own ``info/index.json``, the name by which conda finds it (py-rattler's indexer leaves a file out of the
    index without a word when its name does not read as name-version-build).
    """
    shown_path = shown_as or path
    where = source or str(shown_path)
    owner = "do not install from this channel; tell its owner"
    with refusals(shown_path, source):
        stem = package_stem(path)
    suffix = ".conda" if path.name.endswith(".conda") else ".tar.bz2"
    if path.name != f"{stem}{suffix}":
        named = stem + suffix
        # A name its index.json gives may be no file name at all (a "/" in it, longer than a file system takes).
        fits = (
            "/" not in named
            and "\0" not in named
            and len(named.encode(errors="surrogateescape")) <= _NAME_MAX
        )
        raise ChannelError(
            f"{where} is not named after the package it holds ({bounded(stem, FIELD_CHARS)}): conda finds a "
            "package by its file name, name-version-build",
            fix=owner
            if source is not None
            else f"rename it: mv {shell_word(shown_path)} {shell_word(shown_path.with_name(named))}"
            if fits
            else f"do not use it: the name-version-build its {INDEX} gives is no file name; remove it",
        )


def package_stem(path: Path, name: str | None = None) -> str:
    """``<name>-<version>-<build>`` of the package at ``path``, from its ``info/index.json``, once the whole file
    was read and found whole and safe (:func:`read_info`); else raise :class:`DamagedPackage` saying why.
    ``name``, the file name it has in a channel (``path``'s own by default), says which of the two formats it is.
    """
    index = read_info(path, (INDEX,), name).get(INDEX)
    if index is None:
        raise DamagedPackage(f"it holds no {INDEX}")
    record = load_json(INDEX, index)
    record = record if isinstance(record, dict) else {}
    fields = []
    for key in ("name", "version", "build"):
        field = record.get(key)
        if not isinstance(field, str) or not field:
            raise DamagedPackage(f"its {INDEX} lacks the {key} (or leaves it empty)")
        fields.append(field)
    # The indexer needs it too: without it, it stops with a message that does not name the package.
    number = record.get("build_number")
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise DamagedPackage(f"its {INDEX} lacks the build_number (a whole number, 0 or more)")
    return "-".join(fields)


# The one package reader: bounded, every member and paths.json entry checked (package_reader's docstring).
read_info = read_package
