# shellcheck shell=bash disable=SC2034
# Shared settings and helpers for contrib/devcluster/{up,down,status,env}. Sourced, never run.
#
# Everything the devcluster creates lives under one directory ($DEVCLUSTER_DIR, default
# /run/slurmkit-devcluster) so that `down` can stop exactly what `up` started (by recorded pid).

DC_DIR=${DEVCLUSTER_DIR:-/run/slurmkit-devcluster}
DC_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

DC_ETC=$DC_DIR/etc          # slurm.conf, gres.conf, slurmdbd.conf (daemons read them via SLURM_CONF)
DC_RUN=$DC_DIR/run          # pid files of every daemon `up` started
DC_LOG=$DC_DIR/log          # one log file per daemon
DC_BIN=$DC_DIR/bin          # hook wrappers named in slurm.conf (sk-jobcomp, sk-prolog, sk-epilog)
DC_DEV=$DC_DIR/dev          # pretend GPUs: character devices nvidia0..7 (major 195, like the real driver)
DC_MUNGE=$DC_DIR/munge      # private munge key and socket
DC_MYSQL=$DC_DIR/mysql      # private MariaDB datadir and socket (slurmdbd's storage)
DC_REST_SOCK=$DC_DIR/rest.sock  # -> rest-alice.sock; rest-bob.sock for bob

# Non-default ports so a real Slurm on the same machine (6817/6818/6819) is never touched.
DC_CTLD_PORT=16817
DC_SLURMD_PORT=16818        # default only; each node below has its own Port=
DC_DBD_PORT=16819
DC_MYSQL_PORT=13306
DC_NODES=(gpu01 gpu02)
DC_NODE_PORTS=(17001 17002)
DC_CLUSTER=devcluster
DC_REST_USERS=(alice bob)   # one slurmrestd per user, running as that user (see start_slurmrestd in up)

export SLURM_CONF=$DC_ETC/slurm.conf
MUNGE_SOCKET=$DC_MUNGE/munge.socket.2

# Daemons in start order; `down` stops them in reverse. Each has $DC_RUN/<name>.pid and the
# executable name that /proc/<pid>/comm must show (so a recycled pid is never killed).
DC_DAEMONS=(munged mariadb slurmdbd slurmctld slurmd-gpu01 slurmd-gpu02 slurmrestd-alice slurmrestd-bob)

dc_comm_of() {
    case $1 in
        munged) echo munged ;;
        mariadb) echo mariadbd ;;
        slurmd-*) echo slurmd ;;
        slurmrestd-*) echo slurmrestd ;;
        *) echo "$1" ;;
    esac
}

# Print the recorded pid of daemon $1 if that process is alive and is the daemon, else nothing.
dc_pid() {
    local f=$DC_RUN/$1.pid pid comm
    [[ -s $f ]] || return 1
    pid=$(tr -dc '0-9' <"$f")
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$(dc_comm_of "$1")" ]] || return 1
    # A zombie is not alive.
    [[ $(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null) != Z ]] || return 1
    echo "$pid"
}

dc_alive() { dc_pid "$1" >/dev/null; }

# Wait up to $2 seconds (default 30) for command "${@:3}" to succeed.
dc_wait_for() {
    local what=$1 timeout=$2 i
    shift 2
    for ((i = 0; i < timeout * 10; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    echo "devcluster: timed out after ${timeout}s waiting for $what" >&2
    return 1
}

dc_log() { printf 'devcluster: %s\n' "$*"; }
