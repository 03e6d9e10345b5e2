"""flagtree-doctor: does this machine and environment suit the flagtree-cpu package?

The runtime diagnostics of the flagtree-cpu conda packages: ``flagtree-doctor`` (:mod:`flagtree_doctor.cli`),
``flagtree-verify`` (:mod:`flagtree_doctor.verify`) and the CPU check FlagTree's CPU backend runs before it
loads its runtime. Base install only (``rich``); importing this package imports none of the checks.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
