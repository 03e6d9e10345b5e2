"""The archive layer: the zip, tar, zstd, bzip2, gzip and xz streams the toolkit reads.

- :mod:`.package`: a conda package (``.conda``, ``.tar.bz2``) read as a stream of members, bounded, with one
  reading only (:func:`open_package`);
- :mod:`.tar_stream`: a tar from outside read bounded, refused where two readers could read it differently;
- :mod:`.zip_stream`: a ``.conda``'s zip read in order from its first byte, as rattler reads it;
- :mod:`.compressed`: the zstd, bzip2, gzip and xz streams, one stream each and nothing after it.

Layer: may import the top-level helpers (``flagtree_feedstock``'s docstring lists them) and nothing else of
the package (``tests/test_layers.py``); ``channel``, ``build``, ``bump`` and ``llvm_archive`` import it.
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
