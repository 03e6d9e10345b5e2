"""conda-build's CLI, offline: ``python conda_build_offline.py ARGS`` runs ``conda-build ARGS``, run by the
python of conda-build's own environment (tests/_conda_tools.py).

Under the classic solver conda-build's package index (``conda_build.index.Index``) leaves out the virtual
packages (``__glibc``, ``__unix``, ...) every compiler and python needs, and so every solve fails on a machine
that reaches no channel: here that index is made with them (``use_system=True``), nothing else changed.
"""

from __future__ import annotations

import sys
from typing import Any

import conda_build.index
from conda.core.index import Index
from conda_build.cli.main_build import execute


class WithVirtualPackages(Index):  # type: ignore[misc]
    """conda's index of the channels, with the virtual packages of this machine in it."""

    def __init__(self, *args: Any, use_system: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, use_system=use_system, **kwargs)


if __name__ == "__main__":
    conda_build.index.Index = WithVirtualPackages
    sys.exit(execute(sys.argv[1:]))
