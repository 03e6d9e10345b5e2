"""Take the build machine's folders out of a built package: the local channels the engine records in it.

py-rattler-build 0.73 writes the build's channels and folders into the package's metadata (seen by building a
toy package with a ``file://`` channel: tests/test_local_paths.py):

- ``info/about.json``: ``channels``, every channel of the build as a URL, so the toolkit's staging folder
  (``file:///.../.channel-staging-XXXX/``) and every ``-c file://...`` channel;
- ``info/recipe/rendered_recipe.yaml``: the same ``channels``; each resolved dependency's ``url`` and
  ``channel`` (``file://...`` for what came from a local channel, as flagtree-cpu's flagtree-llvm does); and
  ``build_configuration.directories`` (``host_prefix``, ``build_prefix``, ``work_dir``, ``build_dir``), all
  under the staging folder.

:func:`scrub_local_paths` rewrites those two records (``info/about.json``, ``info/recipe/*``) so that each
of those folders, as a ``file://`` URL or as a plain path, reads ``local`` (conda's name for a channel of
one's own builds). Nothing else changes: the package's files, ``info/paths.json`` (whose prefix placeholder
the installer relocates by, so it must stay as built), ``info/index.json`` and the tests stay byte for byte.
A package that holds none of the folders is left untouched (its file is not rewritten).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

import zstandard

from flagtree_feedstock.channel.folder import package_files

LOCAL = "local"
INFO_ZSTD_LEVEL = 19  # the inner info archive is small; rattler-build's own default level for .conda is 15-22


def local_folders(folders: Iterable[Path], channels: Iterable[str]) -> list[Path]:
    """``folders`` and the folder of every ``file://`` channel, each as given and resolved."""
    found = [*folders, *(Path(unquote(urlparse(c).path)) for c in channels if c.startswith("file://"))]
    return list(dict.fromkeys(p for folder in found for p in (folder.absolute(), folder.resolve())))


def scrub_text(text: str, folders: Iterable[Path]) -> str:
    """``text`` with each folder, as a ``file://`` URL (percent-encoded or not) or a plain path, replaced by
    ``local``; only whole folders (``/a/b`` is not a part of ``/a/bc``), the longest first."""
    for folder in sorted(folders, key=lambda f: len(str(f)), reverse=True):
        path = str(folder).rstrip("/")
        spellings = sorted({folder.as_uri().rstrip("/"), f"file://{path}", path}, key=len, reverse=True)
        pattern = "|".join(re.escape(s) for s in spellings)
        text = re.sub(f"(?:{pattern})(?![^/\\s\"',\\]}}])", LOCAL, text)
    return text


def _recorded(name: str) -> bool:
    """The members that record the build's channels and folders: ``info/about.json``, ``info/recipe/*``."""
    return name == "info/about.json" or name.startswith("info/recipe/")


def _scrub_tar(data: bytes, folders: list[Path], *, bz2: bool) -> bytes | None:
    """A tar archive (``data``, bzip2-compressed or plain) with its records scrubbed, or ``None`` when they
    hold none of ``folders``."""
    out = io.BytesIO()
    changed = False
    with (
        tarfile.open(fileobj=io.BytesIO(data), mode="r:bz2" if bz2 else "r:") as source,
        tarfile.open(fileobj=out, mode="w:bz2" if bz2 else "w:", format=source.format) as target,
    ):
        for member in source.getmembers():
            handle = source.extractfile(member) if member.isfile() else None
            content = handle.read() if handle is not None else None
            if content is not None and _recorded(member.name):
                try:
                    scrubbed = scrub_text(content.decode("utf-8"), folders).encode("utf-8")
                except UnicodeDecodeError:  # not text: a folder's name cannot be in it as written
                    scrubbed = content
                if scrubbed != content:
                    content, member.size, changed = scrubbed, len(scrubbed), True
            target.addfile(member, io.BytesIO(content) if content is not None else None)
    return out.getvalue() if changed else None


def _scrub_conda(package: Path, folders: list[Path]) -> bytes | None:
    """The ``.conda`` file with its ``info-*.tar.zst`` scrubbed, or ``None`` when nothing changes."""
    with zipfile.ZipFile(package) as archive:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    out = io.BytesIO()
    changed = False
    with zipfile.ZipFile(out, "w") as target:
        for info, content in entries:
            data = content
            if info.filename.startswith("info-") and info.filename.endswith(".tar.zst"):
                raw = zstandard.ZstdDecompressor().decompressobj().decompress(content)
                scrubbed = _scrub_tar(raw, folders, bz2=False)
                if scrubbed is not None:
                    data = zstandard.ZstdCompressor(level=INFO_ZSTD_LEVEL).compress(scrubbed)
                    changed = True
            target.writestr(info, data)
    return out.getvalue() if changed else None


@contextmanager
def _replacing(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` that replaces it on success; removed on any failure or interrupt."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    staged = Path(name)
    try:
        yield staged
        staged.chmod(path.stat().st_mode & 0o777)
        staged.replace(path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise


def scrub_local_paths(package: Path, folders: Iterable[Path]) -> bool:
    """Rewrite ``package`` (``.conda`` or ``.tar.bz2``) without ``folders`` in its metadata; whether it changed."""
    folders = list(folders)
    if package.name.endswith(".conda"):
        scrubbed = _scrub_conda(package, folders)
    else:
        scrubbed = _scrub_tar(package.read_bytes(), folders, bz2=True)
    if scrubbed is None:
        return False
    with _replacing(package) as staged:
        staged.write_bytes(scrubbed)
    return True


def scrub_new_packages(
    staging: Path, seeded: Collection[str], channel_dir: Path, channels: Sequence[str]
) -> bool:
    """Scrub every package the build put into ``staging`` (not those seeded from ``channel_dir`` or published
    before) of the staging folder, the channel folder and every ``file://`` channel of the build; whether any
    package changed (``staging``'s index then lists the old files' sha256 and must be written again)."""
    folders = local_folders([staging, channel_dir], channels)
    changed = False
    for package in package_files(staging):
        if package.name not in seeded:
            changed |= scrub_local_paths(package, folders)
    return changed
