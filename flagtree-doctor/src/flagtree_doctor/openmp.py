"""The OpenMP environment the doctor recommends: on big.LITTLE, kernels on the big cores only.

FlagTree's CPU launcher runs a kernel's programs in an OpenMP ``parallel for`` (``omp_get_max_threads()``
threads); the runtime's GEMVs split work evenly over ``omp_get_num_threads()``. On a big.LITTLE SoC the
little cores finish last and every barrier waits for them (the upstream FAQ: half speed; its remedy is
``taskset -c <big cores>`` on every process). The same, set once in the environment:

- ``OMP_NUM_THREADS``: the number of big cores;
- ``OMP_PLACES``: one place per big core, ``{4},{5},...``, in the explicit form the libgomp manual
  documents ("a comma-separated list of places; a place is a set of nonnegative numbers in curly braces",
  GCC 9 onwards; the bare numbers of OpenMP 5.1 need GCC 12): any set of big cores (``0,1,6-11`` too) has
  the same form;
- ``OMP_PROC_BIND=close``: bind the threads to those places, in order.

On a machine whose cores are all alike nothing is recommended: nothing should restrict the cores.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Literal, get_args

Shell = Literal["sh", "fish"]
SHELLS: tuple[Shell, ...] = get_args(Shell)
VARIABLES: tuple[str, ...] = ("OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND")


def places(cpus: Iterable[int]) -> str:
    """One OpenMP place per CPU, in libgomp's syntax: ``{4},{5},{6}``."""
    return ",".join(f"{{{cpu}}}" for cpu in sorted(set(cpus)))


def recommend(big: Iterable[int], little: Iterable[int]) -> dict[str, str]:
    """The variables to set for these big and little cores (empty where there are no little ones)."""
    big = sorted(set(big))
    if not list(little) or not big:
        return {}
    return {"OMP_NUM_THREADS": str(len(big)), "OMP_PLACES": places(big), "OMP_PROC_BIND": "close"}


def is_applied(recommended: Mapping[str, str], env: Mapping[str, str]) -> bool:
    """Whether ``env`` already holds every recommended value."""
    return all(env.get(name) == value for name, value in recommended.items())


def fish_quote(value: str) -> str:
    """``value`` as one fish word: single quotes, with fish's two escapes inside them."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def export_lines(recommended: Mapping[str, str], shell: Shell) -> list[str]:
    """Lines that set ``recommended`` in ``shell`` (``eval "$(flagtree-doctor --env)"``)."""
    if not recommended:
        return ["# flagtree-doctor: the cores are all alike, no OpenMP setting is needed"]
    if shell == "fish":
        return [f"set -gx {name} {fish_quote(value)}" for name, value in recommended.items()]
    return [f"export {name}={shlex.quote(value)}" for name, value in recommended.items()]
