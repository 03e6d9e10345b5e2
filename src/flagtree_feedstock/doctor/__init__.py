"""flagtree-doctor: does this machine and environment suit the flagtree-cpu package?

Base-install only (``rich``): this package ships to users as the small noarch ``flagtree-doctor`` output.
"""

from __future__ import annotations

from .checks import CHECK_IDS, CHECKS, diagnose
from .model import Check, CheckResult, Status, System
from .target import PACKAGE_TARGET

__all__ = ["CHECKS", "CHECK_IDS", "PACKAGE_TARGET", "Check", "CheckResult", "Status", "System", "diagnose"]
