#!/usr/bin/env bash
# Stand-in for FlagTree's python/scripts/link_flagtree_cpu.sh in the rehearsal's synthesized FlagTree tree
# (no FLAGTREE_SRC): with --flagtree-cpu-path it makes third_party/triton-cpu and the same 12 relative links
# into it, and fails, as upstream's does, on a link that does not resolve. It cannot show upstream's clone
# mode or its other options.
set -euo pipefail
[[ "${1:-}" == "--flagtree-cpu-path" && -n "${2:-}" ]] || { echo "usage: $0 --flagtree-cpu-path PATH" >&2; exit 1; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
[[ -d "$2" ]] || { echo "[link_flagtree_cpu] ERROR: --flagtree-cpu-path $2 is not a directory" >&2; exit 1; }
[[ ! -e "${root}/third_party/triton-cpu" || -L "${root}/third_party/triton-cpu" ]] \
  || { echo "[link_flagtree_cpu] ERROR: third_party/triton-cpu exists and is not a symlink" >&2; exit 1; }
ln -sfn "$(realpath --relative-to="${root}/third_party" "$2")" "${root}/third_party/triton-cpu"
links=(
  "include/triton/Dialect/TritonCPU|../../../third_party/triton-cpu/include/triton/Dialect/TritonCPU"
  "lib/Dialect/TritonCPU|../../third_party/triton-cpu/lib/Dialect/TritonCPU"
  "third_party/cpu/CMakeLists.txt|../triton-cpu/third_party/cpu/CMakeLists.txt"
  "third_party/cpu/include|../triton-cpu/third_party/cpu/include"
  "third_party/cpu/lib|../triton-cpu/third_party/cpu/lib"
  "third_party/cpu/runtime|../triton-cpu/third_party/cpu/runtime"
  "third_party/cpu/triton_cpu.cc|../triton-cpu/third_party/cpu/triton_cpu.cc"
  "third_party/sleef|triton-cpu/third_party/sleef"
  "third_party/cpu/language/cpu/neon.py|../../../../third_party/triton-cpu/third_party/cpu/language/cpu/neon.py"
  "third_party/cpu/language/cpu/runtime.py|../../../../third_party/triton-cpu/third_party/cpu/language/cpu/runtime.py"
  "third_party/cpu/language/cpu/tle_ops.py|../../../../third_party/triton-cpu/third_party/cpu/language/cpu/tle_ops.py"
  "python/triton/language/extra/cpu|../../../../third_party/cpu/language/cpu"
)
for entry in "${links[@]}"; do
  link="${root}/${entry%%|*}"
  mkdir -p "$(dirname "${link}")"
  ln -sfn "${entry#*|}" "${link}"
done
for entry in "${links[@]}"; do
  [[ -e "${root}/${entry%%|*}" ]] || { echo "[link_flagtree_cpu] ERROR: symlink does not resolve: ${entry%%|*}" >&2; exit 1; }
done
