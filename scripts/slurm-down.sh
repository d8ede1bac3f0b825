#!/usr/bin/env bash
# Stop the single-node SLURM cluster started by scripts/slurm-up.sh.  Idempotent.
#
#   bash scripts/slurm-down.sh                # cancel all jobs, stop slurmd, slurmctld, slurmdbd, mariadbd, munged
#   SLURM_CLEAN=1 bash scripts/slurm-down.sh  # ... and wipe job state + accounting DB (job ids restart at 1)
#
# Uses only the pid files under $SLURM_HOME/run (default ${TMPDIR:-/tmp}/ladder-slurm), checking
# each process's name, so it never signals an unrelated process.  Jobs are cancelled first so
# that no slurmstepd / job processes are left behind.  Knobs: SLURM_HOME, SLURM_STOP_WAIT_S=30.
set -euo pipefail
SLURM_HOME=${SLURM_HOME:-${TMPDIR:-/tmp}/ladder-slurm}
WAIT=${SLURM_STOP_WAIT_S:-30}
SLURM_CLEAN=${SLURM_CLEAN:-0}
RUN=$SLURM_HOME/run LOG=$SLURM_HOME/log
export SLURM_CONF=$SLURM_HOME/etc/slurm.conf
case ":$PATH:" in *:/usr/sbin:*) ;; *) export PATH=$PATH:/usr/sbin:/sbin ;; esac

T0=$(date +%s%N)
# serialise with slurm-up.sh (which holds the lock already when it calls us)
if [ "${_LADDER_SLURM_LOCKED:-}" != "$SLURM_HOME" ] && [ -d "$SLURM_HOME" ]; then
    exec 9>>"$SLURM_HOME/.lock"
    flock -w 300 9 || { echo "slurm-down: ERROR: another slurm-up/slurm-down holds $SLURM_HOME/.lock" >&2; exit 1; }
fi
log() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[slurm-down %d.%03ds] %s\n' $((ms/1000)) $((ms%1000)) "$*"; }

declare -A COMM=([munged]=munged [mysqld]=mariadbd [slurmdbd]=slurmdbd [slurmctld]=slurmctld [slurmd]=slurmd)
# pid_alive PID [COMM]: exists, is not a zombie (kill -0 succeeds on zombies, which linger ~2 s
# in containers whose PID 1 reaps lazily) and has the expected name
pid_alive() {
    local st; st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] || return 1
    [ -z "${2:-}" ] || [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]
}
alive() { [ -s "$RUN/$1.pid" ] && pid_alive "$(cat "$RUN/$1.pid")" "${COMM[$1]}"; }
# our_stepds: pids of slurmstepd processes of this cluster (recognised by SLURM_CONF in their environment)
our_stepds() {
    local d
    for d in /proc/[0-9]*; do
        [ "$(cat "$d/comm" 2>/dev/null)" = slurmstepd ] || continue
        { tr '\0' '\n' <"$d/environ" | grep -qx "SLURM_CONF=$SLURM_CONF"; } 2>/dev/null && echo "${d#/proc/}"
    done
    return 0
}

# 1. cancel all jobs while slurmctld/slurmd are still up; wait (bounded) for them to go
if alive slurmctld && [ -f "$SLURM_CONF" ]; then
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u || true)
    if [ -n "$jobs" ]; then
        log "cancelling jobs: $(echo $jobs)"
        # shellcheck disable=SC2086
        scancel $jobs 2>/dev/null || true
        left=$jobs
        for _ in $(seq $((WAIT * 5))); do
            left=$(squeue -h -o %A 2>/dev/null || true)
            [ -z "$left" ] && break
            sleep 0.2
        done
        [ -z "$left" ] || log "WARNING: jobs still listed after ${WAIT}s: $(echo $left)"
    fi
fi
# let the job steps of cancelled jobs exit (bounded, 5 s)
for _ in $(seq 25); do [ -z "$(our_stepds)" ] && break; sleep 0.2; done

# 2. stop daemons in reverse start order
stopped=0
stop() { # stop NAME
    local pf=$RUN/$1.pid pid
    [ -s "$pf" ] || return 0
    pid=$(cat "$pf")
    if pid_alive "$pid" "${COMM[$1]}"; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq $((WAIT * 10))); do pid_alive "$pid" || break; sleep 0.1; done
        if pid_alive "$pid"; then
            log "WARNING: $1 (pid $pid) still running after ${WAIT}s: SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
        fi
        log "stopped $1 (pid $pid)"
        stopped=$((stopped + 1))
    fi
    rm -f "$pf"
}
stop slurmd
stop slurmctld
stop slurmdbd
stop mysqld
stop munged
rm -f "$RUN/munge.socket" "$RUN/munge.socket.lock" "$RUN/mysqld.sock"

# job steps of this cluster that outlived slurmd (should not happen after the scancel above)
for p in $(our_stepds); do log "killing leftover slurmstepd $p"; kill -KILL "$p" 2>/dev/null || true; done

if [ "$SLURM_CLEAN" = 1 ]; then
    log "SLURM_CLEAN=1: wiping job state, slurmd spool and accounting DB"
    rm -rf "${SLURM_HOME:?}/state" "${SLURM_HOME:?}/spool" "${SLURM_HOME:?}/mysql"
fi
if [ "$stopped" = 0 ]; then log "cluster was not running ($SLURM_HOME)"; else log "cluster down"; fi
exit 0
