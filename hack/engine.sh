#!/usr/bin/env bash
# Make a container engine usable on this machine (as root; CI: a fresh Debian bookworm, maybe
# without systemd). Idempotent: a second run changes nothing and says so.
#
#   hack/engine.sh            # docker: install docker.io if missing, start dockerd if not answering
#   hack/engine.sh podman     # podman: install podman if missing (daemonless, nothing to start)
#   hack/engine.sh status     # exit 0 when `docker info` answers on the default socket
#   hack/engine.sh stop       # stop the dockerd this script started (pid file below), nothing else
#
# Docker:
#   * installed from Debian's packages (docker.io, with containerd, runc, iptables) with
#     --no-install-recommends; the package's init script is kept from starting a daemon with its
#     default settings during the install (a temporary policy-rc.d, only if none exists);
#   * a daemon that already answers on /var/run/docker.sock is used as it is (whoever started it);
#   * with systemd as PID 1: `systemctl start docker`;
#   * otherwise dockerd is started here, detached (setsid), pid file /var/run/docker.pid (dockerd
#     writes it), log /var/log/trainops-dockerd.log, with TRAINOPS_DOCKERD_ARGS (default below).
#
# Docker's iptables: by default dockerd sets `iptables -P FORWARD DROP` and loads br_netfilter, after
# which a bridge in the root network namespace stops forwarding between its ports. The namespace lab
# (hack/lab.py, docs/contributing/lab.md) is immune by design (its bridge lives in a namespace of its own with
# no rules), but other bridges on the machine are not. The daemon started here needs no bridge
# networking at all (this project's containers use the host network, and the image build only runs
# `docker import`/`save`), so it runs with `--iptables=false --ip6tables=false --ip-masq=false
# --bridge=none`: it never touches the host's firewall and creates no docker0. A daemon that was
# already running is left as it is; the script prints its FORWARD policy when that is DROP.
#
# Environment:
#   TRAINOPS_DOCKERD_ARGS   arguments for a dockerd started here
#                           (default: --iptables=false --ip6tables=false --ip-masq=false --bridge=none)
#   TRAINOPS_ENGINE_TIMEOUT seconds to wait for the daemon to answer (default 60)
set -euo pipefail

engine="${1:-docker}"
timeout="${TRAINOPS_ENGINE_TIMEOUT:-60}"
pidfile=/var/run/docker.pid
logfile=/var/log/trainops-dockerd.log
dockerd_args="${TRAINOPS_DOCKERD_ARGS:---iptables=false --ip6tables=false --ip-masq=false --bridge=none}"
export DEBIAN_FRONTEND=noninteractive

say() { printf 'engine: %s\n' "$*"; }
die() { printf 'engine: error: %s\n' "$*" >&2; exit 1; }

[[ "$(id -u)" == 0 ]] || die "must run as root (installs packages, starts dockerd)"

# one run at a time (make test builds the test image while the lab tests start): a second run waits for the
# first, then finds the daemon answering; apt-get waits for dpkg's lock instead of failing when another
# apt-get (the lab's, mmdebstrap's) holds it
exec 9>/run/lock/trainops-engine.lock
flock -n 9 || { say "another hack/engine.sh is running; waiting for it"; flock 9; }

apt_install() {
    # $@: packages. No service may start during the install (the init script would start dockerd
    # with its defaults, iptables included); a policy-rc.d that someone else put there is kept.
    local policy=/usr/sbin/policy-rc.d ours=0
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\n# hack/engine.sh: no service starts during its apt-get install\nexit 101\n' >"$policy"
        chmod 0755 "$policy"
        ours=1
    fi
    # shellcheck disable=SC2064
    trap "[[ $ours == 1 ]] && rm -f '$policy'" EXIT
    say "installing $* (apt-get, Debian packages)"
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
    if [[ "$ours" == 1 ]]; then rm -f "$policy"; fi
    trap - EXIT
}

docker_answers() {
    # the daemon on the default socket answers (any docker client: the distribution's or another)
    timeout 10 docker -H unix:///var/run/docker.sock info --format '{{.ServerVersion}}' >/dev/null 2>&1
}

forward_note() {
    local policy
    policy="$(iptables -S FORWARD 2>/dev/null | head -n1 || true)"
    if [[ "$policy" == "-P FORWARD DROP" ]]; then
        say "note: iptables FORWARD policy is DROP (Docker's default); the lab's bridge is in its own" \
            "namespace and is not affected (docs/contributing/lab.md)"
    fi
}

case "$engine" in
    status)
        if docker_answers; then
            say "docker $(docker -H unix:///var/run/docker.sock info --format '{{.ServerVersion}}') answers on /var/run/docker.sock"
            exit 0
        fi
        say "no docker daemon answers on /var/run/docker.sock"
        exit 1
        ;;
    stop)
        # only the dockerd this script started: its command line was recorded when it answered
        if [[ -s "$pidfile" ]] && [[ -s /var/run/trainops-dockerd.cmdline ]]; then
            pid="$(cat "$pidfile")"
            if [[ -r "/proc/$pid/cmdline" ]] && [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline")" == "$(cat /var/run/trainops-dockerd.cmdline)" ]]; then
                say "stopping dockerd $pid"
                kill -TERM "$pid"
                for _ in $(seq 1 "$timeout"); do
                    [[ -d "/proc/$pid" ]] || break
                    sleep 1
                done
                rm -f /var/run/trainops-dockerd.cmdline
                exit 0
            fi
        fi
        say "no dockerd started by hack/engine.sh is running"
        exit 0
        ;;
    podman)
        if command -v podman >/dev/null 2>&1; then
            say "podman $(podman --version | awk '{print $3}') is installed (daemonless: nothing to start)"
            exit 0
        fi
        apt_install podman
        say "podman $(podman --version | awk '{print $3}') installed"
        exit 0
        ;;
    docker) ;;
    *) die "unknown engine '$engine' (docker, podman, status, stop)" ;;
esac

changed=0
if ! command -v dockerd >/dev/null 2>&1 || ! command -v containerd >/dev/null 2>&1; then
    apt_install docker.io
    changed=1
fi
# the distribution's client when no other one is installed
command -v docker >/dev/null 2>&1 || die "docker.io is installed but there is no docker client in PATH"

if docker_answers; then
    say "docker daemon $(docker -H unix:///var/run/docker.sock info --format '{{.ServerVersion}}') answers on /var/run/docker.sock$([[ $changed == 1 ]] || echo ' (no changes)')"
    forward_note
    exit 0
fi

if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
    say "starting docker.service (systemd)"
    systemctl start docker 9>&-
else
    if [[ -s "$pidfile" ]]; then
        pid="$(cat "$pidfile")"
        if [[ -d "/proc/$pid" ]] && grep -q dockerd "/proc/$pid/comm" 2>/dev/null; then
            die "dockerd $pid is running (pid file $pidfile) but does not answer on /var/run/docker.sock; see $logfile"
        fi
        rm -f "$pidfile"   # stale: dockerd refuses to start while it is there
    fi
    say "starting dockerd (no systemd): $dockerd_args; log $logfile"
    # shellcheck disable=SC2086  # word splitting of the argument string is intended
    setsid dockerd --pidfile "$pidfile" -H unix:///var/run/docker.sock $dockerd_args \
        </dev/null >>"$logfile" 2>&1 9>&- &
    disown || true
fi

for _ in $(seq 1 "$timeout"); do
    if docker_answers; then
        if [[ -s "$pidfile" ]]; then
            tr '\0' ' ' <"/proc/$(cat "$pidfile")/cmdline" >/var/run/trainops-dockerd.cmdline 2>/dev/null || true
        fi
        say "docker daemon $(docker -H unix:///var/run/docker.sock info --format '{{.ServerVersion}}') answers on /var/run/docker.sock (pid $(cat "$pidfile" 2>/dev/null || echo '?'))"
        forward_note
        exit 0
    fi
    sleep 1
done
tail -n 30 "$logfile" >&2 || true
die "dockerd did not answer within ${timeout}s (log $logfile)"
