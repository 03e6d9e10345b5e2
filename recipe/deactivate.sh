# shellcheck shell=sh
# flagtree-cpu: conda sources this on `conda deactivate`; it undoes activate.sh exactly.
if [ -n "${_FLAGTREE_CPU_ACTIVE:-}" ]; then
    if [ -n "${_FLAGTREE_CPU_OLD_FLAGTREE_BACKEND+x}" ]; then
        export FLAGTREE_BACKEND="${_FLAGTREE_CPU_OLD_FLAGTREE_BACKEND}"
        unset _FLAGTREE_CPU_OLD_FLAGTREE_BACKEND
    else
        unset FLAGTREE_BACKEND
    fi

    if [ -n "${_FLAGTREE_CPU_OLD_TRITON_SYS_PATH+x}" ]; then
        export TRITON_SYS_PATH="${_FLAGTREE_CPU_OLD_TRITON_SYS_PATH}"
        unset _FLAGTREE_CPU_OLD_TRITON_SYS_PATH
    else
        unset TRITON_SYS_PATH
    fi

    if [ -n "${_FLAGTREE_CPU_SET_CC:-}" ]; then
        if [ -n "${_FLAGTREE_CPU_OLD_CC+x}" ]; then
            export CC="${_FLAGTREE_CPU_OLD_CC}"
            unset _FLAGTREE_CPU_OLD_CC
        else
            unset CC
        fi
        unset _FLAGTREE_CPU_SET_CC
    fi

    unset _FLAGTREE_CPU_ACTIVE
fi
