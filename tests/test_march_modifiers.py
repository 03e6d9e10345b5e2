"""A tier's ``-march`` modifier is added only for a CPU with every feature it needs (flagtree_doctor.tier).

Off the Armv9 tier, the JIT assembles ``kernel.s`` with ``-march=armv8.2-a+dotprod`` and each GCC modifier
whose features every core has (``KERNEL_MARCH_MODIFIERS``; ``fp16`` needs both ``fphp`` and ``asimdhp``), and
compiles the TLE NEON objects with the modifiers of ``TLE_NEON_MARCH_MODIFIERS``. A modifier added for a CPU
that has only some of its features makes the assembler accept instructions the CPU cannot run (SIGILL in a
kernel). Each modifier is tried on a CPU with every proper subset of its features, through the public
function FlagTree's patches call (:class:`~flagtree_doctor.tier.KernelTarget` of
:func:`~flagtree_doctor.tier.choose_tier`).
"""

from __future__ import annotations

from itertools import combinations

import pytest

from flagtree_doctor.capabilities import Capabilities
from flagtree_doctor.target import (
    BASELINE_RUNTIME,
    DERIVED_MARCH_BASE,
    KERNEL_MARCH_MODIFIERS,
    TLE_NEON_MARCH_MODIFIERS,
)
from flagtree_doctor.tier import KernelTarget, choose_tier


def _target(features: frozenset[str]) -> KernelTarget:
    """What the JIT compiles for on a CPU with the floor and ``features`` (recorded, no SVE: the baseline tier)."""
    capabilities = Capabilities(
        machine="aarch64",
        features=BASELINE_RUNTIME.features | features,
        source="recorded",
        sve_vector_bits=None,
    )
    target = KernelTarget(choice=choose_tier(capabilities))
    assert target.choice.tier == "baseline"
    return target


def _march_modifiers(target: KernelTarget) -> dict[str, set[str]]:
    """The modifiers each ``-march`` the target gives adds to the base (the kernel's, the TLE NEON objects')."""
    (flag,) = target.assembler_flags
    marches = {"kernel": flag.removeprefix("-march="), "tle_neon": target.tle_neon_march}
    assert all(march.startswith(DERIVED_MARCH_BASE) for march in marches.values()), marches
    return {
        which: set(filter(None, march.removeprefix(DERIVED_MARCH_BASE).split("+")))
        for which, march in marches.items()
    }


CASES = [
    pytest.param(
        which, name, needs, frozenset(subset), id=f"{which}-{name}-with-{'+'.join(subset) or 'none'}"
    )
    for which, modifiers in (("kernel", KERNEL_MARCH_MODIFIERS), ("tle_neon", TLE_NEON_MARCH_MODIFIERS))
    for name, needs in modifiers
    for size in range(len(needs))
    for subset in combinations(sorted(needs), size)
]


@pytest.mark.parametrize(("which", "name", "needs", "subset"), CASES)
def test_a_modifier_needs_every_one_of_its_features(
    which: str, name: str, needs: frozenset[str], subset: frozenset[str]
) -> None:
    """The CPU has the floor, every other modifier's features, and ``subset`` of this one's: it gets the tier
    and every other modifier, not this one; given the rest of this one's features, it gets this one too."""
    modifiers = dict(KERNEL_MARCH_MODIFIERS if which == "kernel" else TLE_NEON_MARCH_MODIFIERS)
    others = frozenset().union(*(n for n in modifiers.values() if not n & needs))
    wanted = {m for m, n in modifiers.items() if n <= others}
    assert _march_modifiers(_target(others | subset))[which] == wanted
    assert _march_modifiers(_target(others | needs))[which] == wanted | {name}
