# shellcheck shell=sh
# flagtree-cpu: conda sources this on `conda activate` (bash, zsh and other POSIX shells).
# FLAGTREE_BACKEND and TRITON_SYS_PATH say where this environment's FlagTree is: they always point at it,
# whatever the user had (kept aside for deactivate). CC names a compiler, the user's choice: a non-empty one
# is kept. deactivate.sh puts every variable back exactly as it was: set to the same value, empty, or unset.
# docs/using.md ("Activation") documents this; tests/test_recipe_activation.py runs it against that table.
if [ -z "${_FLAGTREE_CPU_ACTIVE:-}" ]; then
    export _FLAGTREE_CPU_ACTIVE=1

    # triton/runtime/build.py reads FLAGTREE_BACKEND when it is imported: without `cpu` the kernels' assembly
    # fails ("kernel.s: Error: junk at end of line") and the launcher is built without OpenMP.
    if [ -n "${FLAGTREE_BACKEND+x}" ]; then
        export _FLAGTREE_CPU_OLD_FLAGTREE_BACKEND="${FLAGTREE_BACKEND}"
    fi
    export FLAGTREE_BACKEND=cpu

    # The CPU driver takes include/ and lib/ for the launcher and the kernel link from here (default /usr/local).
    if [ -n "${TRITON_SYS_PATH+x}" ]; then
        export _FLAGTREE_CPU_OLD_TRITON_SYS_PATH="${TRITON_SYS_PATH}"
    fi
    export TRITON_SYS_PATH="${CONDA_PREFIX}"

    # build.py compiles with $CC, else the first gcc on PATH. A user's (or a compiler package's) CC is kept;
    # an unset or empty one becomes this environment's gcc, the one with the matching libgomp and omp.h.
    if [ -z "${CC:-}" ] && [ -x "${CONDA_PREFIX}/bin/gcc" ]; then
        export _FLAGTREE_CPU_SET_CC=1
        if [ -n "${CC+x}" ]; then
            export _FLAGTREE_CPU_OLD_CC="${CC}"
        fi
        export CC="${CONDA_PREFIX}/bin/gcc"
    fi
fi
