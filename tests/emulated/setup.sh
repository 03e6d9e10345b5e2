#!/usr/bin/env bash
# Prepare the `emulated` test tier: qemu-user, an aarch64 cross compiler, and an aarch64 CPython
# sysroot unpacked from Debian's arm64 packages. Idempotent: a second run only checks.
#
#   bash tests/emulated/setup.sh            # as root on Debian/Ubuntu (apt-get)
#
# The tests run `qemu-aarch64-static -L SYSROOT -cpu <model> SYSROOT/usr/bin/python3.11 ...`
# explicitly, so no binfmt_misc registration is needed (and none is made).
set -euo pipefail

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/flagtree-feedstock"
SYSROOT="${FLAGTREE_AARCH64_SYSROOT:-$CACHE_ROOT/aarch64-sysroot}"
# What python3.11 needs to start and to load ctypes (libffi), plus libstdc++ for the GLIBCXX check.
PACKAGES=(
    libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libssl3 libffi8 libbz2-1.0 liblzma5 libuuid1 libcrypt1
    libpython3.11-minimal libpython3.11-stdlib python3.11-minimal
)
STAMP="$SYSROOT/.flagtree-sysroot"

log() { printf 'setup.sh: %s\n' "$*" >&2; }

need_root() {
    if [[ $(id -u) -ne 0 ]]; then
        log "must run as root to $1 (or install it yourself and re-run)"
        exit 1
    fi
}

# 1. Host tools: qemu-user-static runs aarch64 code, gcc-aarch64-linux-gnu builds the probe.
missing=()
command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    need_root "add the arm64 dpkg architecture"
    log "+ dpkg --add-architecture arm64"
    dpkg --add-architecture arm64
    apt_stale=1
fi
if [[ -n ${apt_stale:-} ]] || ! apt-cache show python3.11-minimal:arm64 >/dev/null 2>&1; then
    need_root "run apt-get update"
    log "+ apt-get update"
    apt-get update -qq
fi
if ((${#missing[@]})); then
    need_root "install ${missing[*]}"
    log "+ apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The aarch64 sysroot: download the .debs (no install: they never touch the host's dpkg state).
want="${PACKAGES[*]}"
if [[ -f $STAMP && $(<"$STAMP") == "$want" ]]; then
    log "sysroot ready: $SYSROOT"
else
    mkdir -p "$(dirname "$SYSROOT")"
    tmp="$(mktemp -d "$(dirname "$SYSROOT")/.sysroot.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    mkdir "$tmp/debs" "$tmp/root"
    chmod 755 "$tmp" "$tmp/debs"  # apt's _apt user downloads into it
    specs=()
    for pkg in "${PACKAGES[@]}"; do
        specs+=("$pkg:arm64")
    done
    log "+ apt-get download ${specs[*]}"
    (cd "$tmp/debs" && apt-get download -qq "${specs[@]}")
    for deb in "$tmp"/debs/*_arm64.deb; do
        dpkg-deb -x "$deb" "$tmp/root"
    done
    printf '%s' "$want" >"$tmp/root/.flagtree-sysroot"
    rm -rf "$SYSROOT"
    mv "$tmp/root" "$SYSROOT"
    rm -rf "$tmp"
    trap - EXIT
    log "sysroot written: $SYSROOT"
fi

# 3. Smoke test: the sysroot's python starts under qemu and has ctypes.
qemu-aarch64-static -L "$SYSROOT" -cpu max "$SYSROOT/usr/bin/python3.11" -S -c 'import ctypes, json' ||
    { log "the aarch64 python in $SYSROOT does not start under qemu"; exit 1; }
log "ok: qemu-aarch64-static + $SYSROOT/usr/bin/python3.11"
