#!/usr/bin/env bash
# A single-node SLURM cluster on localhost, for the cluster tests (pytest -m cluster) and for trying
# the documented SLURM commands on one machine. Debian's packages (slurm-wlm 22.05, munge, slurmdbd
# with MariaDB, so that submitit's sacct polling works), all running as root from one state folder:
#
#   slurm/local_cluster.sh start    # install what is missing (root, apt-get), write configs, start the daemons
#   slurm/local_cluster.sh status   # each daemon's PID, then sinfo; exit 0 when the cluster answers
#   slurm/local_cluster.sh env      # the line to paste: export SLURM_CONF=<state>/slurm.conf
#   slurm/local_cluster.sh stop     # stop what start started (by the PID files), keep the state folder
#
# State (configs, munge key and socket, logs, spool, the accounting database) lives in
# $MOGG_SLURM_DIR (default /tmp/mogg-slurm), never in /etc: clients find the cluster through
# SLURM_CONF. Ports: MOGG_SLURM_PORT (default 16817) for slurmctld, +1 slurmd, +2 slurmdbd, +3 MariaDB,
# away from a site's own SLURM (6817-6819) and MySQL (3306). Every step is idempotent: start on a
# running cluster starts only what is down; stop on a stopped one does nothing.
set -euo pipefail

STATE=${MOGG_SLURM_DIR:-/tmp/mogg-slurm}
PORT=${MOGG_SLURM_PORT:-16817}
CLUSTER=mogg-local
PARTITION=debug
# Shorter than SLURM's defaults so that the cluster tests run in minutes: the SIGTERM -> SIGKILL grace on
# requeue and cancel (30 s), how long a requeued job waits before it may start again (cred_expire, 120 s),
# and how often the scheduler looks at pending jobs (60 s, backfill 30 s).
KILL_WAIT=10
CRED_EXPIRE=10
SCHED_INTERVAL=5
PACKAGES=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server)
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)   # start order; stop runs it backwards

die() { echo "local_cluster.sh: $*" >&2; exit 1; }
log() { echo "local_cluster.sh: $*"; }
pidfile() { echo "$STATE/run/$1.pid"; }

running() {  # the daemon $1 runs under the PID its file names
    local f; f=$(pidfile "$1")
    [[ -s $f ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

install_packages() {
    local missing=() bin
    for bin in slurmctld slurmd slurmdbd munged mariadbd mariadb-install-db sinfo sacct; do
        command -v "$bin" >/dev/null || missing+=("$bin")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}; as root: apt-get install ${PACKAGES[*]}"
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install ${PACKAGES[*]}"
    log "installing ${PACKAGES[*]} (apt-get)"
    # policy-rc.d stops the packages' own services starting on the default ports; ours use $PORT..
    if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" \
            >"$STATE/log/apt-get.log" 2>&1 || { apt-get update -q >>"$STATE/log/apt-get.log" 2>&1 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" \
            >>"$STATE/log/apt-get.log" 2>&1; }; }; then
        die "apt-get install ${PACKAGES[*]} failed: $(tail -n 1 "$STATE/log/apt-get.log")"
    fi
}

# The node as slurmd sees it (CPUs, sockets, cores, threads), and 95% of its memory: a node that
# registers less memory than configured is drained, and the machine's free memory drifts.
node_line() {
    local detected mem
    detected=$(slurmd -C | head -n 1) || die "slurmd -C could not read this machine's resources"
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$detected")
    [[ -n $mem ]] || die "slurmd -C gave no RealMemory: $detected"
    sed -e "s/^NodeName=[^ ]*/NodeName=$NODE NodeAddr=127.0.0.1/" -e "s/RealMemory=[0-9]*/RealMemory=$((mem * 95 / 100))/" \
        <<<"$detected"
}

write_configs() {
    local munge="$STATE/munge/munge.socket"
    [[ -s $STATE/db.password ]] || (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$STATE/db.password")
    cat >"$STATE/slurm.conf" <<EOF
# written by slurm/local_cluster.sh: a one-node cluster on localhost (state in $STATE)
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge,cred_expire=$CRED_EXPIRE
CredType=cred/munge
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$(pidfile slurmctld)
SlurmdPidFile=$(pidfile slurmd)
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
# no cgroups in a container: processes tracked through /proc, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=$SCHED_INTERVAL,bf_interval=$SCHED_INTERVAL
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$((PORT + 2))
# slurmctld talks to slurmdbd through this munge socket (AuthInfo covers only the cluster's own messages)
AccountingStoragePass=$munge
# each step's processes sampled every second from /proc (no cgroups here): sacct's MaxRSS, AveCPU
# (scripts/rehearse_scale.py --scheduler slurm reads each task's MaxRSS, Elapsed and TotalCPU)
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobCompType=jobcomp/none
ReturnToService=2
# tasks keep the submitter's nice value (nice -n 10 python build.py -m hydra/launcher=slurm ...): a shared machine
PropagatePrioProcess=1
KillWait=$KILL_WAIT
MinJobAge=600
$(node_line)
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    (umask 077; cat >"$STATE/slurmdbd.conf" <<EOF
# written by slurm/local_cluster.sh (slurmdbd reads it beside SLURM_CONF; mode 600: it holds the DB password)
AuthType=auth/munge
AuthInfo=socket=$munge
DbdHost=localhost
DbdPort=$((PORT + 2))
SlurmUser=root
LogFile=$STATE/log/slurmdbd.log
PidFile=$(pidfile slurmdbd)
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((PORT + 3))
StorageUser=slurm
StoragePass=$(cat "$STATE/db.password")
StorageLoc=slurm_acct_db
EOF
    )
    chmod 600 "$STATE/slurmdbd.conf"
}

wait_for() {  # wait_for <what> <seconds> <command...>: until the command succeeds
    local what=$1 secs=$2 i; shift 2
    for ((i = 0; i < secs * 4; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.25
    done
    return 1
}

start_munged() {
    mkdir -p "$STATE/munge" && chmod 700 "$STATE/munge"
    [[ -s $STATE/munge/munge.key ]] || (umask 077; head -c 1024 /dev/urandom >"$STATE/munge/munge.key")
    # --force: munged refuses root (and a socket under /tmp) otherwise; this cluster is root-only
    munged --force --socket="$STATE/munge/munge.socket" --key-file="$STATE/munge/munge.key" \
        --pid-file="$(pidfile munged)" --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/munged.seed" \
        || die "munged did not start: $(tail -n 1 "$STATE/log/munged.log" 2>/dev/null)"
    wait_for munged 10 test -S "$STATE/munge/munge.socket" || die "munged made no socket (see $STATE/log/munged.log)"
}

mysql_root() { mariadb --socket="$STATE/mysql.sock" -uroot "$@"; }

start_mariadbd() {
    if [[ ! -d $STATE/mysql/mysql ]]; then
        mariadb-install-db --user=root --datadir="$STATE/mysql" --auth-root-authentication-method=socket \
            --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 \
            || die "mariadb-install-db failed (see $STATE/log/mariadb-install.log)"
    fi
    setsid mariadbd --user=root --datadir="$STATE/mysql" --socket="$STATE/mysql.sock" --port=$((PORT + 3)) \
        --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$(pidfile mariadbd)" \
        --log-error="$STATE/log/mariadbd.log" --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
    wait_for mariadbd 60 mysql_root -e "select 1" || die "MariaDB did not answer (see $STATE/log/mariadbd.log)"
    mysql_root <<EOF || die "could not create the accounting database's user"
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$STATE/db.password")';
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
}

start_slurmdbd() {
    SLURM_CONF="$STATE/slurm.conf" slurmdbd || die "slurmdbd did not start (see $STATE/log/slurmdbd.log)"
    wait_for slurmdbd 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$((PORT + 2))" \
        || die "slurmdbd does not listen on $((PORT + 2)) (see $STATE/log/slurmdbd.log)"
}

start_slurmctld() {
    mkdir -p "$STATE/slurmctld"
    SLURM_CONF="$STATE/slurm.conf" slurmctld || die "slurmctld did not start (see $STATE/log/slurmctld.log)"
    wait_for slurmctld 30 env SLURM_CONF="$STATE/slurm.conf" scontrol ping \
        || die "slurmctld does not answer (see $STATE/log/slurmctld.log)"
}

start_slurmd() {
    mkdir -p "$STATE/slurmd"
    SLURM_CONF="$STATE/slurm.conf" slurmd -N "$NODE" || die "slurmd did not start (see $STATE/log/slurmd.log)"
}

node_ready() {
    local s; s=$(SLURM_CONF="$STATE/slurm.conf" sinfo -h -N -o %t 2>/dev/null | head -n 1)
    [[ $s == idle* || $s == mix* || $s == alloc* ]]
}

start() {
    # the daemons run as root (SlurmUser=root, munged --force): a one-user test cluster, not a site's
    [[ $(id -u) -eq 0 ]] || die "runs its daemons as root: run it as root (sudo $0 start)"
    mkdir -p "$STATE/run" "$STATE/log" && chmod 700 "$STATE"
    install_packages
    write_configs
    local d
    for d in "${DAEMONS[@]}"; do
        if running "$d"; then continue; fi
        "start_$d"
        running "$d" || wait_for "$d" 10 running "$d" || die "$d exited at start (see $STATE/log/$d.log)"
    done
    if ! wait_for node 30 node_ready; then
        # a node left down/drained by an earlier run (stop kills slurmd under running jobs) is resumed once
        SLURM_CONF="$STATE/slurm.conf" scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
        wait_for node 15 node_ready || die "node $NODE is not idle: $(SLURM_CONF="$STATE/slurm.conf" sinfo -h -N -o '%t %E' | head -n 1)"
    fi
    log "running ($(SLURM_CONF="$STATE/slurm.conf" sinfo -h -N -o '%N %c CPUs %m MB %t' | head -n 1)); export SLURM_CONF=$STATE/slurm.conf"
}

stop() {
    local i d pid
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
        d=${DAEMONS[i]}
        running "$d" || continue
        pid=$(cat "$(pidfile "$d")")
        kill "$pid"
        wait_for "$d" 30 bash -c "! kill -0 $pid" || { kill -9 "$pid" 2>/dev/null || true; }
        rm -f "$(pidfile "$d")"
        log "stopped $d ($pid)"
    done
}

status() {
    local d up=0
    for d in "${DAEMONS[@]}"; do
        if running "$d"; then echo "$d: running ($(cat "$(pidfile "$d")"))"; else echo "$d: stopped"; up=1; fi
    done
    [[ $up -eq 0 ]] && SLURM_CONF="$STATE/slurm.conf" sinfo -N 2>/dev/null || up=1
    return $up
}

NODE=$(hostname -s)
case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    env) echo "export SLURM_CONF=$STATE/slurm.conf" ;;
    *) die "usage: $0 start|stop|status|env" ;;
esac
