"""flagtree-doctor: does this machine and environment suit the flagtree-cpu package?

The runtime diagnostics of the flagtree-cpu conda packages: ``flagtree-doctor`` (:mod:`flagtree_doctor.cli`),
``flagtree-verify`` (:mod:`flagtree_doctor.verify`) and the CPU check FlagTree's CPU backend runs before it
loads its runtime. Base install only (``rich``); importing this package imports none of the checks.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, looked up only when asked for: FlagTree imports this package before every kernel."""
    if name == "__version__":
        from ._version import version  # noqa: PLC0415 - lazily, see above

        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
