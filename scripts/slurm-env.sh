# Source me (do not execute) to point sbatch/squeue/sacct/submitit at the local SLURM cluster
# started by scripts/slurm-up.sh:
#
#   source scripts/slurm-env.sh      # exports SLURM_CONF (and adds /usr/sbin to PATH)
#
# Same as `source ${SLURM_HOME:-${TMPDIR:-/tmp}/ladder-slurm}/env.sh`, but usable before
# knowing SLURM_HOME.  Returns 1 (without exiting the shell) if the cluster is not configured.
_ladder_slurm_home=${SLURM_HOME:-${TMPDIR:-/tmp}/ladder-slurm}
if [ -f "$_ladder_slurm_home/env.sh" ]; then
    . "$_ladder_slurm_home/env.sh"
    unset _ladder_slurm_home
else
    echo "slurm-env.sh: no $_ladder_slurm_home/env.sh: run 'bash scripts/slurm-up.sh' first" >&2
    unset _ladder_slurm_home
    return 1 2>/dev/null || exit 1
fi
