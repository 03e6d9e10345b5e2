# flagtree-cpu: conda sources this on `conda activate` in fish; see activate.sh for why each variable.
# As there: FLAGTREE_BACKEND and TRITON_SYS_PATH always point at this environment (the user's values are kept
# aside for deactivate.fish); a non-empty CC, the user's compiler, is kept.
if not set -q _FLAGTREE_CPU_ACTIVE
    set -gx _FLAGTREE_CPU_ACTIVE 1
    if set -q FLAGTREE_BACKEND
        set -gx _FLAGTREE_CPU_OLD_FLAGTREE_BACKEND "$FLAGTREE_BACKEND"
    end
    set -gx FLAGTREE_BACKEND cpu
    if set -q TRITON_SYS_PATH
        set -gx _FLAGTREE_CPU_OLD_TRITON_SYS_PATH "$TRITON_SYS_PATH"
    end
    set -gx TRITON_SYS_PATH "$CONDA_PREFIX"
    if test -z "$CC"; and test -x "$CONDA_PREFIX/bin/gcc"
        set -gx _FLAGTREE_CPU_SET_CC 1
        if set -q CC
            set -gx _FLAGTREE_CPU_OLD_CC "$CC"
        end
        set -gx CC "$CONDA_PREFIX/bin/gcc"
    end
end
