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
# What python3.11 needs to start and to load ctypes (libffi), plus libstdc++ for the GLIBCXX check and
# libgomp for the stand-in runtimes, built with OpenMP as the real one is (tests/emulated/standin_runtime.c).
PACKAGES=(
    libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libssl3 libffi8 libbz2-1.0 liblzma5 libuuid1 libcrypt1
    libpython3.11-minimal libpython3.11-stdlib python3.11-minimal libgomp1
)
STAMP="$SYSROOT/.flagtree-sysroot"

log() { printf 'setup.sh: %s\n' "$*" >&2; }

need_root() {
    if [[ $(id -u) -ne 0 ]]; then
        log "must run as root to $1 (or install it yourself and re-run)"
        exit 1
    fi
}

# 1. Host tools: qemu-user-static runs aarch64 code, gcc-aarch64-linux-gnu builds the probe and
# libc6-dev-arm64-cross gives it the target's libc headers and start files (only a Recommends of the
# compiler, which --no-install-recommends leaves out).
missing=()
for pkg in qemu-user-static gcc-aarch64-linux-gnu libc6-dev-arm64-cross; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
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
# Every test run of this user reads it, two at once too (parallel clones, a shared runner), so it is never
# rewritten in place: each package list gets a folder of its own, named by the list's hash and made whole
# before one rename puts it there, and SYSROOT is a link to it, replaced by a rename. A run that started
# before keeps the folder it resolved the link to (tests/conftest.py resolves it once).
want="${PACKAGES[*]}"
if [[ -f $STAMP && $(<"$STAMP") == "$want" ]]; then
    log "sysroot ready: $SYSROOT"
else
    parent="$(dirname "$SYSROOT")"
    keyed="$SYSROOT.$(printf '%s' "$want" | sha256sum | cut -c1-16)"
    mkdir -p "$parent"
    tmp="$(mktemp -d "$parent/.sysroot.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    if [[ ! -f $keyed/.flagtree-sysroot ]]; then
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
        # Another setup.sh may have put the same folder there meanwhile: then its copy is the one kept.
        mv -T "$tmp/root" "$keyed" 2>/dev/null || [[ -f $keyed/.flagtree-sysroot ]]
    fi
    if [[ -d $SYSROOT && ! -L $SYSROOT ]]; then
        rm -rf "$SYSROOT"  # a folder an older setup.sh wrote in place: replaced by the link, once
    fi
    ln -s "$(basename "$keyed")" "$tmp/link"
    mv -T "$tmp/link" "$SYSROOT"
    rm -rf "$tmp"
    trap - EXIT
    log "sysroot written: $keyed (linked as $SYSROOT)"
fi

# 3. Smoke tests: the cross compiler links a program, and the sysroot's python starts under qemu with ctypes.
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf '#include <stdio.h>\nint main(void) { return puts("ok") < 0; }\n' >"$probe/probe.c"
aarch64-linux-gnu-gcc "$probe/probe.c" -o "$probe/probe" ||
    { log "aarch64-linux-gnu-gcc cannot link a program (is libc6-dev-arm64-cross installed?)"; exit 1; }
qemu-aarch64-static -L "$SYSROOT" -cpu max "$SYSROOT/usr/bin/python3.11" -S -c 'import ctypes, json' ||
    { log "the aarch64 python in $SYSROOT does not start under qemu"; exit 1; }
log "ok: aarch64-linux-gnu-gcc links, qemu-aarch64-static + $SYSROOT/usr/bin/python3.11 start"
