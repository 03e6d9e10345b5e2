"""flagtree-verify: the flagtree-cpu package test (install checks, then each TLE op against torch).

Importing this package needs neither torch nor triton; they are imported when the steps run.
"""

from __future__ import annotations

from .ops import OP_NAMES, Outcome, check_install, run_ops
from .references import TOLERANCES, Tolerance

__all__ = ["OP_NAMES", "TOLERANCES", "Outcome", "Tolerance", "check_install", "run_ops"]
