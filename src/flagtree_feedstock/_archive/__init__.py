"""The archive layer: every zip, tar, zstd, bzip2, gzip and xz stream the toolkit reads or writes.

- :mod:`.package`: a conda package (``.conda``, ``.tar.bz2``) read as a stream of members, bounded, with one
  reading only (:func:`open_package`);
- :mod:`.package_write`: a conda package written reproducibly, member by member (``write_package``);
- :mod:`.tar_stream`: a tar from outside read bounded, refused where two readers could read it differently;
- :mod:`.tar_write`: a tar written member by member;
- :mod:`.zip_stream`: a ``.conda``'s zip read in order from its first byte, as rattler reads it;
- :mod:`.compressed`: the zstd, bzip2, gzip and xz streams, one stream each and nothing after it.

No other module of the toolkit imports :mod:`zipfile`, :mod:`tarfile`, ``zstandard``, :mod:`bz2`,
:mod:`gzip`, :mod:`lzma` or :mod:`zlib` (``tests/test_archive_imports.py``).

Layer: may import the top-level helpers (``flagtree_feedstock``'s docstring lists them) and nothing else of
the package (``tests/test_layers.py``); ``channel``, ``builder``, ``bump`` and ``llvm_archive`` import it.
"""

from __future__ import annotations

from .package import (
    INFO_BYTES,
    LIMITS,
    ZSTD_WINDOW,
    DamagedPackage,
    Package,
    PackageMember,
    UnsafePackage,
    open_package,
)

__all__ = [
    "INFO_BYTES",
    "LIMITS",
    "ZSTD_WINDOW",
    "DamagedPackage",
    "Package",
    "PackageMember",
    "UnsafePackage",
    "open_package",
]
