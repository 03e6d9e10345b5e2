# flagtree-cpu: conda sources this on `conda deactivate` in fish; it undoes activate.fish exactly.
if set -q _FLAGTREE_CPU_ACTIVE
    if set -q _FLAGTREE_CPU_OLD_FLAGTREE_BACKEND
        set -gx FLAGTREE_BACKEND "$_FLAGTREE_CPU_OLD_FLAGTREE_BACKEND"
        set -e _FLAGTREE_CPU_OLD_FLAGTREE_BACKEND
    else
        set -e FLAGTREE_BACKEND
    end
    if set -q _FLAGTREE_CPU_OLD_TRITON_SYS_PATH
        set -gx TRITON_SYS_PATH "$_FLAGTREE_CPU_OLD_TRITON_SYS_PATH"
        set -e _FLAGTREE_CPU_OLD_TRITON_SYS_PATH
    else
        set -e TRITON_SYS_PATH
    end
    if set -q _FLAGTREE_CPU_SET_CC
        if set -q _FLAGTREE_CPU_OLD_CC
            set -gx CC "$_FLAGTREE_CPU_OLD_CC"
            set -e _FLAGTREE_CPU_OLD_CC
        else
            set -e CC
        end
        set -e _FLAGTREE_CPU_SET_CC
    end
    set -e _FLAGTREE_CPU_ACTIVE
end
