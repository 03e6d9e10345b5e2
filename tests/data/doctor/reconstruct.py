"""Write the recorded machine trees under this folder (see README.md: they are reconstructed).

Run from anywhere: ``python tests/data/doctor/reconstruct.py``. Each tree is a fake filesystem root with
``proc/cpuinfo``, ``proc/sys/abi/sve_default_vector_length`` where the machine has SVE, and
``sys/devices/system/cpu/cpuN/{cpu_capacity,regs/identification/midr_el1,cpufreq/scaling_governor}`` where
the machine exposes them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent

ARMV9_FEATURES = (
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop "
    "sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes "
    "svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh rng bti"
)


@dataclass(frozen=True, kw_only=True)
class CoreSpec:
    implementer: int
    variant: int
    part: int
    revision: int
    features: str
    capacity: int | None = None
    governor: str | None = None
    sysfs_midr: bool = True

    @property
    def midr(self) -> int:
        return self.implementer << 24 | self.variant << 20 | 0xF << 16 | self.part << 4 | self.revision


def write_machine(name: str, cores: list[CoreSpec], *, sve_default_bytes: int | None, bogomips: str) -> None:
    root = HERE / name
    shutil.rmtree(root, ignore_errors=True)
    blocks = []
    for cpu, core in enumerate(cores):
        blocks.append(
            f"processor\t: {cpu}\n"
            f"BogoMIPS\t: {bogomips}\n"
            f"Features\t: {core.features}\n"
            f"CPU implementer\t: {core.implementer:#04x}\n"
            f"CPU architecture: 8\n"
            f"CPU variant\t: {core.variant:#x}\n"
            f"CPU part\t: {core.part:#05x}\n"
            f"CPU revision\t: {core.revision}\n"
        )
        base = root / "sys/devices/system/cpu" / f"cpu{cpu}"
        base.mkdir(parents=True)
        if core.capacity is not None:
            (base / "cpu_capacity").write_text(f"{core.capacity}\n")
        if core.sysfs_midr:
            (base / "regs/identification").mkdir(parents=True)
            (base / "regs/identification/midr_el1").write_text(f"0x{core.midr:016x}\n")
        if core.governor is not None:
            (base / "cpufreq").mkdir()
            (base / "cpufreq/scaling_governor").write_text(f"{core.governor}\n")
    (root / "proc").mkdir()
    (root / "proc/cpuinfo").write_text("\n".join(blocks) + "\n")
    if sve_default_bytes is not None:
        (root / "proc/sys/abi").mkdir(parents=True)
        (root / "proc/sys/abi/sve_default_vector_length").write_text(f"{sve_default_bytes}\n")


def main() -> None:
    # CIX P1 (Radxa Orion O6): 4x Cortex-A520 + 8x Cortex-A720 in two clusters, schedutil.
    a520 = CoreSpec(
        implementer=0x41,
        variant=0,
        part=0xD80,
        revision=1,
        features=ARMV9_FEATURES,
        capacity=279,
        governor="schedutil",
    )
    a720_mid = CoreSpec(
        implementer=0x41,
        variant=0,
        part=0xD81,
        revision=1,
        features=ARMV9_FEATURES,
        capacity=905,
        governor="schedutil",
    )
    a720_big = CoreSpec(
        implementer=0x41,
        variant=0,
        part=0xD81,
        revision=1,
        features=ARMV9_FEATURES,
        capacity=1024,
        governor="schedutil",
    )
    write_machine(
        "cix-p1-orion-o6",
        [a520] * 4 + [a720_mid] * 4 + [a720_big] * 4,
        sve_default_bytes=16,
        bogomips="2000.00",
    )

    # AWS Graviton3 (Neoverse V1, 256-bit SVE, no SVE2), no cpufreq, no MIDR in sysfs: cpuinfo only.
    v1_features = (
        "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc "
        "dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp "
        "svei8mm svebf16 i8mm bf16 dgh rng"
    )
    v1 = CoreSpec(implementer=0x41, variant=1, part=0xD40, revision=1, features=v1_features, sysfs_midr=False)
    write_machine("neoverse-v1-graviton3", [v1] * 16, sve_default_bytes=32, bogomips="2100.00")

    # A Neoverse N2 server (128-bit SVE2), cpu_capacity 1024 everywhere, performance governor.
    n2 = CoreSpec(
        implementer=0x41,
        variant=0,
        part=0xD49,
        revision=0,
        features=ARMV9_FEATURES,
        capacity=1024,
        governor="performance",
    )
    write_machine("neoverse-n2", [n2] * 8, sve_default_bytes=16, bogomips="100.00")

    # Fujitsu A64FX (FX700): 48 cores, 512-bit SVE, Armv8.2 without dotprod/i8mm/bf16/SVE2.
    a64fx = CoreSpec(
        implementer=0x46,
        variant=1,
        part=0x001,
        revision=0,
        features="fp asimd evtstrm sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm fcma dcpop sve",
        governor="performance",
    )
    write_machine("a64fx", [a64fx] * 48, sve_default_bytes=64, bogomips="200.00")

    # A qemu-system-aarch64 `-cpu max` guest: MIDR implementer 0 (software), part 0x051 ('Q'); the guest
    # kernel's default SVE vector length is 64 bytes.
    qemu_features = (
        ARMV9_FEATURES + " mte ecv afp rpres mte3 sme sme_i16i64 sme_f64f64 sme_i8i32 sme_f16f32 "
        "sme_b16f32 sme_f32f32 sme_fa64 wfxt ebf16 sve_ebf16 cssc rprfm sve2p1"
    )
    qemu = CoreSpec(implementer=0x00, variant=0, part=0x051, revision=0, features=qemu_features)
    write_machine("qemu-max", [qemu] * 4, sve_default_bytes=64, bogomips="125.00")

    # Armv8.2 cores with dotprod and fp16, without SVE, i8mm or bf16 (Arm's Neoverse N1 and Cortex-A76
    # technical reference manuals): the features Linux prints for them, in its order (hwcap_str in
    # arch/arm64/kernel/cpuinfo.c).
    armv82_features = (
        "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"
    )

    # AWS Graviton2 (an m6g.4xlarge: 16 vCPUs), Neoverse N1 r3p1; a Nitro VM exposes no cpufreq.
    n1 = CoreSpec(
        implementer=0x41, variant=3, part=0xD0C, revision=1, features=armv82_features + " ssbs", capacity=1024
    )
    write_machine("neoverse-n1-graviton2", [n1] * 16, sve_default_bytes=None, bogomips="243.75")

    # Raspberry Pi 5 (Broadcom BCM2712): 4x Cortex-A76 r4p1, Raspberry Pi OS's ondemand governor.
    a76 = CoreSpec(
        implementer=0x41,
        variant=4,
        part=0xD0B,
        revision=1,
        features=armv82_features,
        capacity=1024,
        governor="ondemand",
    )
    write_machine("cortex-a76-raspberry-pi-5", [a76] * 4, sve_default_bytes=None, bogomips="108.00")


if __name__ == "__main__":
    main()
