"""The build folder taken out of a built package's files, where the engine's own steps wrote it.

The engine builds under ``<staging>/bld/rattler-build_<name>_<seconds>/`` (its work folder and both prefixes),
a path that differs from build to build. Some of it stays in the package where no compiler flag reaches:

- the ``.pyc`` files the engine compiles in the host prefix (each code object's ``co_filename``; Python puts
  the real path in when it loads one, so the recorded one is never used);
- pip's ``direct_url.json`` (the work folder it installed from), and the hash of it in ``RECORD``, which also
  holds the hash of each entry-point script pip wrote with the host prefix in its first line;
- an ELF file's build-id, which the linker hashes over the file as linked, with the run path conda's
  ``LDFLAGS`` give (the host prefix), before the engine rewrites that run path to ``$ORIGIN``.

:func:`replace_build_folder` writes a fixed name over the folder in every text file, and a placeholder of the
same length in every other (lengths, and so offsets in binaries and marshalled strings, stay as they are: so a
``.pyc`` still differs between two build folders of different lengths); :func:`fix_records` brings each
``RECORD`` up to date; :func:`content_build_id` makes a build-id from the file itself (its sha1 with the
build-id zeroed, as ``debugedit --build-id`` recomputes it), so the same file gets the same id.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import struct
from collections.abc import Mapping

# What the build folder becomes in a text file: what the build scripts' -ffile-prefix-map name it after.
BUILD_FOLDER = "/usr/src/build"
_ELF64_LE = b"\x7fELF\x02\x01"
_SHT_NOTE = 7
_NT_GNU_BUILD_ID = 3


def _text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def replace_build_folder(contents: Mapping[str, bytes], folder: str, placeholder: str) -> dict[str, bytes]:
    """The files of ``contents`` that hold ``folder``: a text file with :data:`BUILD_FOLDER` in its place (the
    same in every build), any other with ``placeholder``, as long as ``folder``, written over it."""
    if len(placeholder) != len(folder):
        raise ValueError("the placeholder must be as long as the folder")
    old = folder.encode()
    return {
        name: data.replace(old, BUILD_FOLDER.encode() if _text(data) else placeholder.encode())
        for name, data in contents.items()
        if old in data
    }


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def fix_records(contents: Mapping[str, bytes], changed: Mapping[str, bytes]) -> dict[str, bytes]:
    """Every ``*.dist-info/RECORD`` of ``contents``: each file of ``changed`` it lists with its new hash and
    size, and each file the package does not hold (a noarch package's ``bin/`` entry points, which the engine
    leaves out and conda writes at install, with the host prefix in the hash pip recorded) with none."""
    fixed = {}
    for name, data in contents.items():
        if not name.endswith(".dist-info/RECORD"):
            continue
        base = name.rsplit("/", 2)[0]
        lines = []
        for line in data.decode("utf-8").splitlines():
            path, _, rest = line.partition(",")
            member = posixpath.normpath(f"{base}/{path}")
            target = changed.get(member)
            if not rest.strip(","):
                lines.append(line)
            elif target is not None:
                lines.append(f"{path},{_record_hash(target)},{len(target)}")
            elif member not in contents:
                lines.append(f"{path},,")
            else:
                lines.append(line)
        text = "\n".join(lines) + "\n"
        if text.encode() != data:
            fixed[name] = text.encode()
    return fixed


def _build_id(data: bytes) -> tuple[int, int] | None:
    """Where a 64-bit little-endian ELF file's GNU build-id lies (offset, length), from its section headers."""
    if not data.startswith(_ELF64_LE) or len(data) < 64:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for index in range(shnum):
        header = shoff + index * shentsize
        if header + 0x28 > len(data):
            return None
        (kind,) = struct.unpack_from("<I", data, header + 4)
        if kind != _SHT_NOTE:
            continue
        offset, size = struct.unpack_from("<QQ", data, header + 0x18)
        at = offset
        while at + 12 <= offset + size:
            namesz, descsz, note = struct.unpack_from("<III", data, at)
            name_at = at + 12
            desc_at = name_at + (namesz + 3) // 4 * 4
            if note == _NT_GNU_BUILD_ID and data[name_at : name_at + namesz] == b"GNU\0":
                return desc_at, descsz
            at = desc_at + (descsz + 3) // 4 * 4
    return None


def content_build_id(data: bytes) -> bytes:
    """``data`` (an ELF file) with its build-id made from its own content; other files unchanged."""
    found = _build_id(data)
    if found is None:
        return data
    offset, length = found
    zeroed = data[:offset] + bytes(length) + data[offset + length :]
    digest = hashlib.sha1(zeroed, usedforsecurity=False).digest()
    return data[:offset] + (digest * (length // len(digest) + 1))[:length] + data[offset + length :]
