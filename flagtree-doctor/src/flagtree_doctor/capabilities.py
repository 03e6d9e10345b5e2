"""What a CPU can execute: the features every core has, and the SVE vector length.

flagtree-doctor's CPU checks, flagtree-verify, the package tests and FlagTree's CPU backend (through
:mod:`flagtree_doctor.cpu_check`) all choose the runtime with :func:`.tier.choose_tier` on these facts, so they
cannot disagree.

Live, features come from ``getauxval(AT_HWCAP/AT_HWCAP2)``, intersected with every ``Features`` line of
``/proc/cpuinfo`` where it has them (one per core: a feature one core lacks counts as missing), and the SVE
vector length from ``prctl(PR_SVE_GET_VL)``: both answer for the CPU this process runs on, under qemu-user too
(where ``/proc/cpuinfo`` is the host's and lists no aarch64 features, so the hwcaps decide). A ``--root`` tree
gives the same facts from its files (:mod:`.cpu`). Imports nothing beyond the standard library: FlagTree runs
this before every kernel it loads.
"""

from __future__ import annotations

import ctypes
import platform
from dataclasses import dataclass
from pathlib import Path

from .bounded import RefusedFile, read_bounded

AT_HWCAP = 16
AT_HWCAP2 = 26
PR_SVE_GET_VL = 51
PR_SVE_VL_LEN_MASK = 0xFFFF
PROC_CPUINFO = Path("/proc/cpuinfo")

# Linux arch/arm64/include/uapi/asm/hwcap.h: bit numbers, named as /proc/cpuinfo names them.
HWCAP_BITS: dict[str, int] = {"asimd": 1, "fphp": 9, "asimdhp": 10, "asimddp": 20, "sve": 22, "asimdfhm": 23}
HWCAP2_BITS: dict[str, int] = {"sve2": 1, "svei8mm": 9, "svebf16": 12, "i8mm": 13, "bf16": 14, "sme": 23}
KNOWN_FEATURES: frozenset[str] = frozenset(HWCAP_BITS) | frozenset(HWCAP2_BITS)


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """The facts a runtime choice needs: the machine, its CPU features and (with SVE) its vector length."""

    machine: str
    features: frozenset[str]  # known features (KNOWN_FEATURES) every core has
    source: str  # where the features were read
    sve_vector_bits: int | None


def cpuinfo_feature_lines(text: str) -> list[frozenset[str]]:
    """The known features of each ``Features`` line of an aarch64 ``/proc/cpuinfo`` (none on other machines)."""
    found = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "features":
            found.append(frozenset(value.split()) & KNOWN_FEATURES)
    return found


def decode_hwcaps(hwcap: int, hwcap2: int) -> frozenset[str]:
    """The known feature names whose bits are set in ``AT_HWCAP``/``AT_HWCAP2``."""
    names = {name for name, bit in HWCAP_BITS.items() if hwcap >> bit & 1}
    names |= {name for name, bit in HWCAP2_BITS.items() if hwcap2 >> bit & 1}
    return frozenset(names)


def live_hwcaps() -> tuple[int, int]:
    """``getauxval(AT_HWCAP)`` and ``getauxval(AT_HWCAP2)`` of this process."""
    libc = ctypes.CDLL(None)
    getauxval = libc.getauxval
    getauxval.restype = ctypes.c_ulong
    getauxval.argtypes = [ctypes.c_ulong]
    return int(getauxval(AT_HWCAP)), int(getauxval(AT_HWCAP2))


def live_sve_vector_bits() -> int | None:
    """This process's SVE vector length in bits, or ``None`` without SVE (``prctl`` fails)."""
    libc = ctypes.CDLL(None)
    prctl = libc.prctl
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    value = int(prctl(PR_SVE_GET_VL, 0, 0, 0, 0))
    return None if value < 0 else (value & PR_SVE_VL_LEN_MASK) * 8


def live_capabilities(cpuinfo: Path = PROC_CPUINFO) -> Capabilities:
    """This process's machine, the features every core has, and the SVE vector length."""
    machine = platform.machine()
    if machine != "aarch64":
        return Capabilities(
            machine=machine, features=frozenset(), source="platform.machine()", sve_vector_bits=None
        )
    features = decode_hwcaps(*live_hwcaps())
    source = "getauxval(AT_HWCAP, AT_HWCAP2)"
    try:
        lines = cpuinfo_feature_lines(read_bounded(cpuinfo).decode("utf-8", errors="replace"))
    except (OSError, RefusedFile):
        lines = []
    if lines:
        features = features.intersection(*lines)
        source += f" and the Features of all {len(lines)} processors in {cpuinfo}"
    return Capabilities(
        machine=machine,
        features=features,
        source=source,
        sve_vector_bits=live_sve_vector_bits() if "sve" in features else None,
    )
