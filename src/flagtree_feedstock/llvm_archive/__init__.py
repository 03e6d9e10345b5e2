"""``build --llvm-archive``: flagtree-llvm installed from Triton's prebuilt LLVM archive instead of built.

Upstream's install guide (docs.flagos.io, "Install on Arm64 CPU", §1.3 LLVM toolchain) takes LLVM prebuilt.
FlagTree's python/setup.py (``get_llvm_package_info``) names it ``llvm-<first 8 characters of
cmake/llvm-hash.txt>-ubuntu-arm64`` on aarch64 Linux (``-almalinux-arm64`` on AlmaLinux), fetches
``https://oaitriton.blob.core.windows.net/public/llvm-builds/<name>.tar.gz`` and unpacks it into
``$TRITON_HOME/.triton/llvm/`` (``get_thirdparty_packages``): the archive holds one top folder ``<name>/``
with ``bin/``, ``include/``, ``lib/``; setup.py adds ``<name>/version.txt`` (the URL) and a symlink
``llvm-ubuntu-arm64`` to the folder. The guide's restricted-network route downloads the same file by hand into
``~/.triton/llvm`` and unpacks it there, so a user holds the archive, the folder, or both.

What ``--llvm-archive`` takes, and what the recipe is given (the variant keys ``llvm_archive_url`` and
``llvm_archive_sha256``, in a variant file of its own read after the others):

- a local archive: ``file://`` and its absolute path, and its sha256, computed (and compared with
  ``--llvm-archive-sha256`` when that is given);
- an unpacked folder: packed reproducibly into the cache (names sorted, owners, times and ``version.txt``
  left out), then as a local archive. Its sha256 is of that packing: it identifies the tree, but cannot be
  compared with a sha256 Triton's archive was published with;
- a URL (``http``/``https``): needs ``--llvm-archive-sha256``. A build downloads it into the cache (through
  the toolkit's HTTP client: timeouts, no redirect to another origin, at most ``--llvm-archive-max-size``) and
  checks it before anything is built, then gives the engine the cached copy; ``--render-only`` does not
  download it.

Before anything renders or builds, each problem is one line: a missing file, a file that is not a tar archive,
an archive whose top is not one folder named like Triton's, a member that would land outside it when unpacked
(``..``, an absolute name, a link leading out) or that is a device or a FIFO (a socket or a FIFO in a folder),
a member the engine's extractor could read differently (a sparse one, a PAX and a GNU name, two at one path),
a header or member beyond the bounded reader's limits (:mod:`flagtree_feedstock._archive.tar_stream`), a ``bin/``
member above 1 GiB, one without ``bin/mlir-tblgen`` (or with one that is no aarch64 program), a
sha256 that differs, a URL without a sha256. The archive is read in place, never unpacked for the check. After the render: an archive of
another LLVM commit than the recipe's ``llvm_commit``, and the glibc floor (:func:`check_rendered`).

The glibc floor: Triton builds the archive on an Ubuntu runner against its glibc, and its static libraries
carry no symbol versions, but its programs do: the highest ``GLIBC_x.y`` any ``bin/*`` needs (read with the
doctor's ELF reader) is the glibc the archive was built against. Above ``c_stdlib_version`` (the sysroot
flagtree-cpu links against) the link of libtriton.so would fail, 20 minutes into the build: refused up front,
naming the sysroot version conda-forge has that is high enough.

Modules: :mod:`.route` (the option checked, the variant file it becomes, what the render decides),
:mod:`.fetch` (a URL downloaded, a folder packed), :mod:`.inspection` (what an archive holds) and
:mod:`.cache` (the cache folder, files written whole). They may import the top-level helpers, the archive
layer (:mod:`flagtree_feedstock._archive`) and :mod:`flagtree_feedstock.recipe`, never ``builder``, ``channel``, ``bump`` or the CLI.
"""

from __future__ import annotations

from .cache import cache_dir
from .inspection import Inspection
from .route import LlvmArchive, check_rendered, from_options, glibc_floor, render_lines, variant_file

__all__ = [
    "Inspection",
    "LlvmArchive",
    "cache_dir",
    "check_rendered",
    "from_options",
    "glibc_floor",
    "render_lines",
    "variant_file",
]
