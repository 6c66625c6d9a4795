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

# ---------------------------------------------------------------- Slurm version
# Two Slurm releases, one at a time: 22.05 (Debian bookworm's packages, binaries in /usr/bin, /usr/sbin) and
# 25.11 (built from the vendored tarball by build-slurm, installed in a prefix stamped with the tarball's
# sha256). `up` records the running one in $DC_VERSION_FILE ("<version> <prefix>"); down removes it.
DC_SLURM_VERSIONS=(22.05 25.11)
DC_SLURM_DEFAULT=22.05      # `up` with no --slurm, DEVCLUSTER_SLURM or running version (the quick path); CI: 25.11
DC_VERSION_FILE=$DC_DIR/slurm-version
DC_VENDOR=${DEVCLUSTER_VENDOR:-$DC_REPO/../shared/vendor}
DC_SLURM_TARBALL=$DC_VENDOR/slurm-25.11.7.tar.xz
DC_REST_JWT_PORT=16820      # 25.11 only: slurmrestd with rest_auth/jwt on 127.0.0.1
DC_REST_JWT_USER=slurmrest  # the unprivileged user that slurmrestd runs as (it forwards each request's token)

# dc_slurm_prefix SHA256: the install prefix of the vendored tarball with that sha256.
dc_slurm_prefix() {
    local v
    v=$(basename "$DC_SLURM_TARBALL" .tar.xz)
    echo "${DEVCLUSTER_SLURM_PREFIX:-/opt/${v}-${1:0:12}}"
}

# The version and prefix of the running devcluster ("22.05 /usr" or "25.11 /opt/slurm-..."), from
# $DC_VERSION_FILE; nothing (exit 1) when none is recorded.
dc_running_version() {
    [[ -s $DC_VERSION_FILE ]] || return 1
    local v p
    read -r v p <"$DC_VERSION_FILE" || true
    [[ -n $v && -n $p ]] || return 1
    echo "$v $p"
}

# Commands of a 25.11 prefix linked into /usr/local/bin (daemons into /usr/local/sbin): ahead of Debian's
# /usr/bin in every PATH (root, alice, bob, `runuser -l`, jobs), removed again by `down`.
DC_LINK_DIRS=(/usr/local/bin /usr/local/sbin)

# dc_unlink_slurm [KEEP]: remove the links in /usr/local/{bin,sbin} that point into a devcluster Slurm
# prefix (/opt/slurm-*, or any prefix with build-slurm's stamp), except into KEEP: Debian's /usr/bin
# commands are what remains.
dc_unlink_slurm() {
    local d l t top
    for d in "${DC_LINK_DIRS[@]}"; do
        for l in "$d"/*; do
            [[ -L $l ]] || continue
            t=$(readlink "$l")
            case $t in */bin/* | */sbin/*) ;; *) continue ;; esac
            top=${t%/*}
            top=${top%/*}
            [[ -n ${1:-} && $top == "$1" ]] && continue
            if [[ $top == /opt/slurm-* || -e $top/.slurmkit-install ]]; then rm -f "$l"; fi
        done
    done
}

# dc_apt_install PACKAGE...: install the missing ones (no service of theirs started: policy-rc.d).
dc_apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    dc_log "installing ${missing[*]}"
    # Package scripts must not start system-wide munge/mariadb/slurm services (we run our own): deny
    # service starts with a policy-rc.d for the duration, unless the machine already has one.
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
    fi
    local apt=(apt-get -o DPkg::Lock::Timeout=600 -q)
    "${apt[@]}" update >/dev/null
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
    ((made_policy)) && rm -f "$policy"
    return 0
}

# Daemons in start order; `down` stops them in reverse. Each has $DC_RUN/<name>.pid and the
# executable name that /proc/<pid>/comm must show (so a recycled pid is never killed).
# slurmrestd-jwt runs on 25.11 only (Debian's 22.05 has no auth/jwt).
DC_DAEMONS=(munged mariadb slurmdbd slurmctld slurmd-gpu01 slurmd-gpu02 slurmrestd-alice slurmrestd-bob slurmrestd-jwt)

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
