"""The one reader of the files the toolkit takes from the repository or from the user: bounded, and only files.

The recipe (``recipe.yaml``, ``meta.yaml``), its build scripts, patches and helpers, the variant files (the
recipe folder's own, the root one, each ``-e`` and ``-m`` file), the pins file ``bump`` rewrites, the
attestations ``upload`` sends, ``RATTLER_AUTH_FILE``: each is read here, and nowhere else, by :func:`read_own`
(or opened by :func:`open_own`, for an ``--llvm-archive`` hashed and unpacked as a stream). Before reading a
byte it refuses:

- what is not a regular file: a folder, a FIFO (an ``open`` that would wait for a writer forever: it is opened
  with ``O_NONBLOCK``), a device (``/dev/zero`` reads without end), a socket;
- for a file of a folder (``inside``: the repository for the recipe's files, the ``--attestations`` folder for
  a bundle), a symbolic link whose target, resolved, leaves that folder: its copy would put a file of this
  machine, not of the repository, into a package, a pull request or an upload. A link within the folder is
  followed. A file the user names on the command line (``-m``, ``-e``, ``RATTLER_AUTH_FILE``) has no such
  folder: the user chose it, and its links are followed wherever they lead, as ``cat`` follows them; it must
  still be a regular file within its bound;
- a file larger than its kind's bound (:class:`Kind`): its size on the open descriptor is checked first, and at
  most bound + 1 bytes are ever read (a file of ``/proc`` says it has none; a file may grow).

It is race-free: the file is opened once, its kind and its place are read from the open descriptor (``fstat``,
and the path the kernel opened, ``/proc/self/fd``), and the bytes come from that descriptor; nothing is
``stat``-ed by name and then opened. Each refusal is one :class:`~flagtree_feedstock.errors.ConfigurationError`
(exit status 2) naming the file, what it is and the fix; a permission or a disk error is a
:class:`~flagtree_feedstock.errors.FileAccessError` naming the path.

Why not the doctor's ``flagtree_doctor.bounded.read_bounded``: it refuses every link or follows every link, and
checks nothing between the open and the read, where the place of the opened file is checked here.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from flagtree_feedstock.errors import ConfigurationError, file_access_error


@dataclass(frozen=True, kw_only=True)
class Kind:
    """A kind of input file: its name in messages, its size bound and what to do when it is missing or larger."""

    name: str
    limit: int
    missing: str  # the fix when the file is not there
    large: str  # the fix when it is larger than ``limit``
    noun: str = "a regular file"  # what the path should name, for the fix of a folder or a device
    named_by: str = "pass"  # how the user names one, for that fix: "pass" (an option), "set VARIABLE to"


# The recipe (recipe.yaml, meta.yaml): ours is 18 KB, conda-forge's largest multi-output recipes a few tens of
# KB. 1 MiB is fifty times ours, and recipe_keys' YAML and jinja passes over it take about 0.4 s here.
RECIPE = Kind(
    name="recipe",
    limit=1 << 20,
    missing="pass --recipe-dir DIR, the folder holding recipe.yaml",
    large="a recipe is a few tens of KB: check that the file is the recipe",
)
# A build or activation script (build-flagtree.sh, activate.sh, ...): ours are at most 11 KB. A script of
# 256 KiB is a program of its own, which belongs in a source, not in the recipe folder.
SCRIPT = Kind(
    name="build script",
    limit=256 << 10,
    missing="add it to the recipe folder, or drop it from the recipe",
    large="a build script is a few KB: move what it carries into a source",
)
# A patch of ours is under 6 KB; a backport on conda-forge is a few hundred KB. 4 MiB is a vendored tree, not a
# patch; its sha256 for the SBOM, bump's parse and GNU patch's check stay well under a second at that size.
PATCH = Kind(
    name="patch",
    limit=4 << 20,
    missing="add the patch, or drop it from the recipe's patches",
    large="a patch is a few KB: carry a change of this size as a source of its own",
)
# Another file the toolkit reads from the recipe folder (llvm_distribution.py, which bump imports, the test
# files and the path source's files that staged-recipes copies): ours are at most 24 KB.
RECIPE_FILE = Kind(
    name="recipe file",
    limit=1 << 20,
    missing="add it, or drop it from the recipe",
    large="the recipe folder holds small text files: check that this is the right one",
)
# A variant file: conda-forge's whole global pinning is about 20 KB (issue 28 item 7). A larger file is
# refused, not parsed: YAML's reader over megabytes costs the render seconds.
VARIANT = Kind(
    name="variant file",
    limit=256 << 10,
    missing="correct the path (--variant-config FILE adds a file; the root conda_build_config.yaml is read "
    "from the current folder, or from --exclusive-config-file FILE)",
    large="a variant file holds a few lists of values: pass the right file, or split it",
    noun="a conda_build_config.yaml",
)
# conda-smithy's settings (conda-forge.yml), which staged-recipes copies: ours is under 1 KB.
SETTINGS = Kind(
    name="conda-smithy settings file",
    limit=256 << 10,
    missing="run from the feedstock's root",
    large="conda-forge.yml holds a few settings: check that this is the right file",
)
# A Sigstore bundle: actions/attest's own limit on a predicate is 16 MiB; a bundle of one package is about 10 KB.
ATTESTATION = Kind(
    name="attestation",
    limit=16 << 20,
    missing="attest each package file of this folder and name its bundle <package file>.sigstore.json",
    large="a Sigstore bundle of one package is a few KB: check that the file is one",
    noun="a Sigstore bundle",
)
# RATTLER_AUTH_FILE: a JSON object of hosts and their credentials, a few hundred bytes per host.
AUTH = Kind(
    name="rattler authentication file",
    limit=1 << 20,
    missing="fix or unset RATTLER_AUTH_FILE (a channel's credentials are added to it for the build)",
    large="fix or unset RATTLER_AUTH_FILE: it holds a few hosts' credentials",
    named_by="set RATTLER_AUTH_FILE to",
)


# Triton's prebuilt LLVM archive (build's ``--llvm-archive``), hashed and unpacked as a stream, never read whole:
# 4 GiB by default, as llvm_archive/fetch.py bounds a download (--llvm-archive-max-size sets both).
LLVM_ARCHIVE = Kind(
    name="LLVM archive",
    limit=4 << 30,
    missing="pass Triton's LLVM archive (llvm-<commit>-<system>.tar.gz) or the folder it unpacked to",
    large="pass Triton's LLVM archive (about 1 GB), or raise --llvm-archive-max-size",
    noun="Triton's LLVM archive",
)
# GitHub's archive of llvm-project at a commit (bump's ``--llvm-archive``, hashed for llvm_sha256): about 250 MB;
# 2 GiB is eight times that.
LLVM_SOURCE = Kind(
    name="LLVM source archive",
    limit=2 << 30,
    missing="download https://github.com/llvm/llvm-project/archive/<llvm_commit>.tar.gz and pass its path",
    large="pass GitHub's archive of llvm-project (about 250 MB)",
    noun="https://github.com/llvm/llvm-project/archive/<llvm_commit>.tar.gz",
)


class NotThere(ConfigurationError):
    """The file is not there (a caller that lists what is missing catches this one)."""


@dataclass(frozen=True)
class OwnFile:
    """What :func:`read_own` read: the bytes, and the file's permission bits (a copy keeps them)."""

    data: bytes
    mode: int


# Each kind of file that is not a regular one: how a message calls it, and the fix for a path the user named.
_KINDS = (
    (stat.S_ISDIR, "a folder", "the path of {noun}, not of a folder"),
    (stat.S_ISFIFO, "a pipe (FIFO)", "a regular file: save what the pipe gives to a file first"),
    (stat.S_ISSOCK, "a socket", "the path of {noun}"),
    (stat.S_ISCHR, "a character device", "the path of {noun}"),
    (stat.S_ISBLK, "a block device", "the path of {noun}"),
)
_PROC_FD = Path("/proc/self/fd")


def repository_of(recipe_dir: Path) -> Path:
    """The repository the recipe folder ``recipe_dir`` belongs to: the folder that holds it, links resolved (as
    the recipe reaches ``../patches``). No file the recipe reads may lead out of it."""
    return Path(os.path.realpath(recipe_dir)).parent


def read_own(
    path: Path, kind: Kind, *, inside: Path | None = None, place: str = "this repository"
) -> OwnFile:
    """The bytes of the regular file ``path`` (a ``kind`` of file), at most ``kind.limit`` of them.

    ``inside``: the folder ``path`` must not lead out of (``place`` names it in a message); None for a file the
    user named, whose links are followed wherever they lead. See the module's docstring for what is refused.
    """
    with open_own(path, kind, inside=inside, place=place) as file:
        try:
            data = file.read(kind.limit + 1)  # never more: a file that grew since its fstat stops here
            mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
        except OSError as exc:  # an I/O error of the disk: named with the file
            raise file_access_error(OSError(exc.errno, exc.strerror, str(path))) from None
    if len(data) > kind.limit:
        raise _too_large(path, kind)
    return OwnFile(data=data, mode=mode)


@contextmanager
def open_own(
    path: Path, kind: Kind, *, inside: Path | None = None, place: str = "this repository"
) -> Iterator[io.BufferedReader]:
    """``path`` open for reading, once :func:`read_own`'s checks pass: for a file read as a stream too (an
    archive, hashed and unpacked in chunks), whose size, read from the open descriptor, is at most
    ``kind.limit``."""
    if inside is not None:
        _refuse_link_out(path, Path(os.path.realpath(path)), kind, inside, place)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotThere(f"{kind.name} {path} does not exist", fix=kind.missing) from None
    except NotADirectoryError:
        raise NotThere(
            f"{kind.name} {path} does not exist: a part of its path is a file, not a folder", fix=kind.missing
        ) from None
    except IsADirectoryError:  # where a folder cannot be opened for reading at all
        raise _not_a_file(path, kind, "a folder", _KINDS[0][2], inside) from None
    except OSError as exc:  # a permission, a loop of links, a name too long: the path and the fix
        raise file_access_error(exc) from None
    try:
        status = os.fstat(descriptor)
        for test, what, instead in _KINDS:
            if test(status.st_mode):
                raise _not_a_file(path, kind, what, instead, inside)
        if inside is not None:
            # Where the file just opened is, as the kernel opened it: a link changed since the check above
            # cannot lead the read out of the folder.
            _refuse_link_out(path, _opened(descriptor, path), kind, inside, place)
        if status.st_size > kind.limit:
            raise _too_large(path, kind)
        file = os.fdopen(descriptor, "rb")  # a regular file: the descriptor is the file's from here
    except BaseException:
        os.close(descriptor)
        raise
    with file:
        yield file


def read_own_text(
    path: Path, kind: Kind, *, inside: Path | None = None, place: str = "this repository"
) -> str:
    """:func:`read_own`'s bytes as UTF-8 text; bytes that are not UTF-8 are one error naming the offset and line."""
    return decode_utf8(path, read_own(path, kind, inside=inside, place=place).data, kind.name)


def decode_utf8(path: Path, data: bytes, what: str) -> str:
    """``data``, the bytes of the ``what`` ``path``, as UTF-8 text, or one error naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigurationError(
            f"{what} {path} is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line})",
            fix=f"save {path.name} as UTF-8 text",
        ) from None


def _refuse_link_out(path: Path, target: Path, kind: Kind, inside: Path, place: str) -> None:
    folder = Path(os.path.realpath(inside))
    if target.is_relative_to(folder):
        return
    if Path(os.path.normpath(Path.cwd() / path)) == target:  # no link on the way: the name itself leads out
        raise ConfigurationError(
            f"{kind.name} {path} is outside {place}", fix=f"keep the file inside {folder}"
        )
    raise ConfigurationError(
        f"{kind.name} {path} is a link to {target}, outside {place}",
        fix=f"replace the link with the file it points to, or with a link inside {folder}",
    )


def _opened(descriptor: int, path: Path) -> Path:
    """The path of the file open on ``descriptor``, as the kernel resolved it; without ``/proc``, ``path``
    resolved now."""
    try:
        return (_PROC_FD / str(descriptor)).readlink()
    except OSError:
        return Path(os.path.realpath(path))


def _not_a_file(path: Path, kind: Kind, what: str, instead: str, inside: Path | None) -> ConfigurationError:
    fix = (
        f"{kind.named_by} {instead.format(noun=kind.noun)}"
        if inside is None
        else f"put the {kind.name} itself at {path}, a regular file"
    )
    return ConfigurationError(f"{kind.name} {path} is {what}, not a file{_link_note(path)}", fix=fix)


def _link_note(path: Path) -> str:
    """``: it is a link to T`` when ``path`` is a symbolic link: the message then says why a file is a device."""
    try:
        return f": it is a link to {path.readlink()}"
    except OSError:
        return ""


def _too_large(path: Path, kind: Kind) -> ConfigurationError:
    return ConfigurationError(
        f"{kind.name} {path} is larger than {_size(kind.limit)}{_link_note(path)}", fix=kind.large
    )


def _size(limit: int) -> str:
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if limit >= 1 << shift and not limit % (1 << shift):
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"
