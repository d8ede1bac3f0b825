#!/usr/bin/env bash
# Start a real single-node SLURM cluster (Debian slurm-wlm + slurmdbd/MariaDB accounting) for
# ladder's tests and CI.  Runs as root; needs no systemd and no cgroups (works in containers).
#
#   bash scripts/slurm-up.sh                 # install if missing, configure, start, wait for idle node
#   source ${TMPDIR:-/tmp}/ladder-slurm/env.sh   # or: source scripts/slurm-env.sh
#   bash scripts/slurm-down.sh               # cancel jobs, stop daemons
#   SLURM_CLEAN=1 bash scripts/slurm-up.sh   # stop if up, wipe job state + accounting DB, start fresh
#
# Idempotent: while the cluster is up a re-run only checks it (about a second); after
# slurm-down.sh it restarts the daemons with the existing state.  Everything (configs,
# state, logs, pid files, sockets, munge key, MariaDB data) lives under $SLURM_HOME; nothing is
# written to /etc except by apt-get.  The last line printed is `SLURM_CONF=<path>`.
#
# Node layout: SLURM_CPUS (default max(8, nproc)) CPU slots, i.e. the node is deliberately
# oversubscribed on small machines so that several 1-CPU test jobs run at once.  This uses
# SlurmdParameters=config_overrides (the node is not drained for having fewer real CPUs than
# configured) with CR_Core over Sockets=1 x Cores=SLURM_CPUS x ThreadsPerCore=1, so a
# `--cpus-per-task=1` job takes exactly one slot.  Memory is not a consumable resource
# (CR_Core, not CR_Core_Memory): --mem is only checked against RealMemory.
#
# Env knobs:
#   SLURM_HOME=${TMPDIR:-/tmp}/ladder-slurm   base directory
#   SLURM_CLEAN=0          1: wipe slurmctld state (queue, job ids) and the accounting DB first,
#                          stopping the cluster if it is up.  Job ids then restart at 1: give
#                          submitit a fresh folder, or an old <id>_result.pkl is returned!
#   SLURM_CPUS=max(8,nproc)   CPU slots of the node
#   SLURM_MEM_MB=95% of RAM   RealMemory of the node (MB)
#   SLURM_PARTITION=debug  name of the single (default) partition
#   SLURM_WAIT_S=60        max seconds to wait for each daemon / the node
#   SLURM_CRED_EXPIRE=10   job credential lifetime = minimum delay before a requeued job restarts
#   SLURMCTLD_PORT=6817 SLURMD_PORT=6818 SLURMDBD_PORT=6819 SLURM_MYSQL_PORT=6820
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SLURM_HOME=${SLURM_HOME:-${TMPDIR:-/tmp}/ladder-slurm}
SLURM_CLEAN=${SLURM_CLEAN:-0}
SLURM_WAIT_S=${SLURM_WAIT_S:-60}
SLURM_PARTITION=${SLURM_PARTITION:-debug}
SLURM_CRED_EXPIRE=${SLURM_CRED_EXPIRE:-10}
SLURMCTLD_PORT=${SLURMCTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-6818}
SLURMDBD_PORT=${SLURMDBD_PORT:-6819}
SLURM_MYSQL_PORT=${SLURM_MYSQL_PORT:-6820}

ETC=$SLURM_HOME/etc RUN=$SLURM_HOME/run LOG=$SLURM_HOME/log
STATE=$SLURM_HOME/state SPOOL=$SLURM_HOME/spool MUNGE_DIR=$SLURM_HOME/munge DB=$SLURM_HOME/mysql
MUNGE_SOCK=$RUN/munge.socket MYSQL_SOCK=$RUN/mysqld.sock
export SLURM_CONF=$ETC/slurm.conf
case ":$PATH:" in *:/usr/sbin:*) ;; *) export PATH=$PATH:/usr/sbin:/sbin ;; esac

T0=$(date +%s%N)
log() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[slurm-up %d.%03ds] %s\n' $((ms/1000)) $((ms%1000)) "$*"; }
DIE_LOGS="munged mysqld slurmdbd slurmctld slurmd"   # logs whose tails die() prints
die() {
    echo "slurm-up: ERROR: $*" >&2
    for f in $DIE_LOGS; do
        if [ -s "$LOG/$f.log" ]; then echo "---- tail -n 15 $LOG/$f.log" >&2; tail -n 15 "$LOG/$f.log" >&2; fi
    done
    exit 1
}
mkdir -p "$LOG"
# one slurm-up/slurm-down at a time per $SLURM_HOME (e.g. parallel test workers); daemons are
# started with fd 9 closed so that they do not inherit the lock
exec 9>>"$SLURM_HOME/.lock"
flock -w $(( SLURM_WAIT_S * 5 )) 9 || die "another slurm-up.sh/slurm-down.sh holds $SLURM_HOME/.lock"

# pid file name -> process name (a stale pid file must never make us trust an unrelated process)
declare -A COMM=([munged]=munged [mysqld]=mariadbd [slurmdbd]=slurmdbd [slurmctld]=slurmctld [slurmd]=slurmd)
running() { # running NAME: the pid file names a live, non-zombie process with the right name
    local pf=$RUN/$1.pid pid st
    [ -s "$pf" ] || return 1
    pid=$(cat "$pf")
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "${COMM[$1]}" ]
}
wait_for() { # wait_for NAME CMD...: until CMD succeeds; fail early if daemon NAME has exited
    local what=$1; shift
    local t0; t0=$(date +%s)
    until "$@" >/dev/null 2>&1; do
        # (pid files appear only once a daemon is initialised: allow 10 s before checking)
        if [ $(( $(date +%s) - t0 )) -ge 10 ] && ! running "$what"; then
            die "$what exited or did not start (see $LOG/$what.log)"
        fi
        [ $(( $(date +%s) - t0 )) -ge "$SLURM_WAIT_S" ] && die "timed out after ${SLURM_WAIT_S}s waiting for $what"
        sleep 0.2
    done
}

# ---------------------------------------------------------------- 1. install (apt, as root)
need_cmds=(munged munge unmunge slurmctld slurmd slurmdbd sbatch sinfo squeue scontrol sacct sacctmgr
           mariadbd mariadb mariadb-install-db)
pkgs=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server mariadb-client)
missing=()
for c in "${need_cmds[@]}"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
    log "missing ${missing[*]}: installing ${pkgs[*]} (apt-get, log $LOG/apt.log)"
    [ "$(id -u)" = 0 ] || die "not root; install as root: apt-get install ${pkgs[*]}"
    command -v apt-get >/dev/null || die "no apt-get: install ${pkgs[*]} (SLURM + munge + MariaDB) by hand"
    # Keep the packages' maintainer scripts from starting system-wide munge/mariadb/slurm services.
    added_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; added_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    DIE_LOGS=apt
    apt_install() { apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>"$LOG/apt.log" 2>&1; }
    : > "$LOG/apt.log"
    # A fresh machine/container has no package lists yet: update first.  Otherwise try the
    # install with the lists we have and update only if that fails (stale lists -> 404s).
    if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
        log "apt-get update (no package lists)"
        apt-get update -q >>"$LOG/apt.log" 2>&1 || die "apt-get update failed"
    fi
    if ! apt_install; then
        log "apt-get install failed; apt-get update and retry"
        apt-get update -q >>"$LOG/apt.log" 2>&1 || die "apt-get update failed"
        apt_install || die "apt-get install ${pkgs[*]} failed"
    fi
    if [ "$added_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
    missing=()
    for c in "${need_cmds[@]}"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
    [ ${#missing[@]} -eq 0 ] || die "still missing after install: ${missing[*]}"
    DIE_LOGS="munged mysqld slurmdbd slurmctld slurmd"
    log "installed $(dpkg-query -W -f='slurm-wlm ${Version}' slurmctld 2>/dev/null || true)"
fi

# ---------------------------------------------------------------- 2. configure
if [ "$SLURM_CLEAN" = 1 ]; then
    if running slurmctld || running slurmd || running slurmdbd || running mysqld || running munged; then
        log "SLURM_CLEAN=1: stopping the running cluster first"
        _LADDER_SLURM_LOCKED=$SLURM_HOME SLURM_HOME=$SLURM_HOME SLURM_CLEAN=0 bash "$HERE/slurm-down.sh" 9>&-
    fi
    log "SLURM_CLEAN=1: wiping job state, slurmd spool and accounting DB (job ids restart at 1)"
    rm -rf "${STATE:?}" "${SPOOL:?}" "${DB:?}"
fi
mkdir -p "$ETC" "$RUN" "$LOG" "$STATE" "$SPOOL/slurmd" "$MUNGE_DIR"
chmod 700 "$MUNGE_DIR"
if [ ! -s "$MUNGE_DIR/munge.key" ]; then
    dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none
    chmod 400 "$MUNGE_DIR/munge.key"
fi

NODE=$(hostname -s)
NPROC=$(nproc)
SLURM_CPUS=${SLURM_CPUS:-$(( NPROC > 8 ? NPROC : 8 ))}
if [ -z "${SLURM_MEM_MB:-}" ]; then
    mem=$(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo)
    # ~5% below the total: a RealMemory above what slurmd sees would DRAIN the node (and the
    # drained state survives restarts)
    SLURM_MEM_MB=$(( mem * 95 / 100 ))
fi

new_conf=$(cat <<EOF
# generated by ladder scripts/slurm-up.sh -- edits are overwritten
ClusterName=ladder
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$SLURMCTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
# cred_expire is also the delay before a requeued job may start again (default 120 s)
AuthInfo=socket=$MUNGE_SOCK,cred_expire=$SLURM_CRED_EXPIRE
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no systemd / cgroups needed:
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
# accounting (submitit reads job states with sacct)
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$SLURMDBD_PORT
# munge socket for the slurmctld->slurmdbd connection (default would be /run/munge/...)
AccountingStoragePass=$MUNGE_SOCK
SchedulerType=sched/backfill
# test latency: schedule new batch jobs at once (default: batched every 3 s) and run the
# main/backfill loops every 2/1 s (defaults 60/30 s) so that requeued jobs restart promptly
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# trust the node layout below even if the machine has fewer CPUs ($NPROC here): oversubscription
SlurmdParameters=config_overrides
ReturnToService=2
# SIGKILL 5 s after SIGTERM (submitit ignores SIGTERM)
KillWait=5
MinJobAge=300
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$SLURM_CPUS Sockets=1 CoresPerSocket=$SLURM_CPUS ThreadsPerCore=1 RealMemory=$SLURM_MEM_MB State=UNKNOWN
PartitionName=$SLURM_PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
)
new_dbd_conf=$(cat <<EOF
# generated by ladder scripts/slurm-up.sh -- edits are overwritten
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort=$SLURMDBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$SLURM_MYSQL_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
)
if [ ! -f "$SLURM_CONF" ] || [ "$new_conf" != "$(cat "$SLURM_CONF")" ] \
   || [ ! -f "$ETC/slurmdbd.conf" ] || [ "$new_dbd_conf" != "$(cat "$ETC/slurmdbd.conf")" ]; then
    if [ -f "$SLURM_CONF" ] && { running slurmctld || running slurmd || running slurmdbd; }; then
        log "configuration changed: restarting the SLURM daemons"
        _LADDER_SLURM_LOCKED=$SLURM_HOME SLURM_HOME=$SLURM_HOME SLURM_CLEAN=0 bash "$HERE/slurm-down.sh" 9>&-
    fi
    printf '%s\n' "$new_conf" > "$SLURM_CONF"
    printf '%s\n' "$new_dbd_conf" > "$ETC/slurmdbd.conf"
fi
chmod 644 "$SLURM_CONF"
chmod 600 "$ETC/slurmdbd.conf"   # slurmdbd refuses a group/world-readable conf

cat > "$SLURM_HOME/env.sh" <<EOF
# generated by ladder scripts/slurm-up.sh: source me to use the local SLURM cluster
export SLURM_CONF=$SLURM_CONF
case ":\$PATH:" in *:/usr/sbin:*) ;; *) export PATH=\$PATH:/usr/sbin:/sbin ;; esac
EOF

# ---------------------------------------------------------------- 3. start
# munged (private socket, key and pid file)
if ! running munged; then
    log "starting munged"
    rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
    munged --key-file="$MUNGE_DIR/munge.key" --socket="$MUNGE_SOCK" --pid-file="$RUN/munged.pid" \
           --log-file="$LOG/munged.log" --seed-file="$MUNGE_DIR/munged.seed" 9>&- \
        || die "munged failed to start"
fi
munge_ok() { munge -S "$MUNGE_SOCK" -n | unmunge -S "$MUNGE_SOCK"; }
wait_for munged munge_ok

# MariaDB (private instance: TCP 127.0.0.1:$SLURM_MYSQL_PORT + private socket)
if [ ! -d "$DB/data/mysql" ]; then
    log "initialising MariaDB datadir"
    rm -rf "$DB"; mkdir -p "$DB"
    mariadb-install-db --no-defaults --user=root --datadir="$DB/data" --skip-test-db \
        >"$LOG/mysql_install.log" 2>&1 || { tail -n 20 "$LOG/mysql_install.log" >&2; die "mariadb-install-db failed"; }
fi
if ! running mysqld; then
    log "starting mariadbd"
    # own session (setsid) so that killing the caller's process group does not take it down
    setsid nohup mariadbd --no-defaults --user=root --datadir="$DB/data" --socket="$MYSQL_SOCK" \
        --pid-file="$RUN/mysqld.pid" --port="$SLURM_MYSQL_PORT" --bind-address=127.0.0.1 \
        --log-error="$LOG/mysqld.log" --innodb-buffer-pool-size=128M \
        --innodb-lock-wait-timeout=900 --skip-log-bin </dev/null >/dev/null 2>&1 9>&- &
fi
sql() { mariadb --no-defaults -S "$MYSQL_SOCK" -u root "$@"; }
wait_for mysqld sql -e 'select 1'
sql -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
        CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" || die "MariaDB grants failed"

if ! running slurmdbd; then
    log "starting slurmdbd"
    slurmdbd 9>&- || die "slurmdbd failed to start"
fi
wait_for slurmdbd sacctmgr -n list cluster

if ! running slurmctld; then
    log "starting slurmctld"
    slurmctld -f "$SLURM_CONF" 9>&- || die "slurmctld failed to start"
fi
wait_for slurmctld scontrol ping

if ! running slurmd; then
    log "starting slurmd"
    slurmd -f "$SLURM_CONF" -N "$NODE" 9>&- || die "slurmd failed to start"
fi

# ---------------------------------------------------------------- 4. wait for the node
deadline=$(( $(date +%s) + SLURM_WAIT_S ))
resumed=0 said=0
while :; do
    st=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1 || true)
    case "$st" in
        idle|mixed|allocated|completing) break ;;
        *drain*|*down*|inval*|fail*)
            if [ "$resumed" = 0 ]; then
                log "node state '$st' ($(sinfo -h -R -n "$NODE" -o %E 2>/dev/null || true)): scontrol update state=RESUME"
                scontrol update nodename="$NODE" state=RESUME || true
                resumed=1
            fi ;;
    esac
    if [ "$said" = 0 ]; then log "waiting for node $NODE to become idle (state '$st')"; said=1; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        sinfo -R >&2 || true; scontrol show node "$NODE" >&2 || true
        die "node $NODE not usable after ${SLURM_WAIT_S}s (state '$st')"
    fi
    sleep 0.25
done
log "cluster up: node $NODE is $st, $SLURM_CPUS CPU slots ($NPROC real), RealMemory=${SLURM_MEM_MB}MB, partition $SLURM_PARTITION; source $SLURM_HOME/env.sh"
echo "SLURM_CONF=$SLURM_CONF"
