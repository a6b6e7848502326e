#!/usr/bin/env bash
# Stops the private Slurm cluster started by tools/slurm_start.sh: cancels its jobs, then stops each daemon by
# the pid in its pid file (slurmd, slurmctld, munged) and waits until it is gone. Never signals by name.
#
#   tools/slurm_stop.sh [--state_dir DIR]     (default: ${TMPDIR:-/tmp}/slurm-local)
#
# Stopping a cluster that is not running is not an error. The state directory is kept (remove it yourself).
set -uo pipefail

state_dir="${TMPDIR:-/tmp}/slurm-local"
while [ $# -gt 0 ]; do
    case "$1" in
        --state_dir|--state-dir) state_dir=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -uo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) echo "$0: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

say() { echo "slurm_stop: $*" >&2; }

if [ ! -d "${state_dir}" ]; then
    say "nothing to stop: no ${state_dir}"
    exit 0
fi
state_dir=$(cd "${state_dir}" && pwd)
export SLURM_CONF="${state_dir}/slurm.conf"

# pid_of PIDFILE PROGRAM: the pid in PIDFILE when it is a running PROGRAM (a stale pid may belong to another process)
pid_of() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "${pid}" ] && kill -0 "${pid}" 2>/dev/null && grep -qa "$2" "/proc/${pid}/cmdline" 2>/dev/null && echo "${pid}"
}

# Cancel every job so slurmd ends their processes before it stops.
if pid_of "${state_dir}/run/slurmctld.pid" slurmctld >/dev/null; then
    jobs=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
        say "cancelling jobs ${jobs}"
        # shellcheck disable=SC2086
        scancel ${jobs} 2>/dev/null || true
        for _ in $(seq 50); do
            [ -z "$(squeue -h -t running,completing -o '%A' 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
fi

# stop_daemons PROGRAM:PIDFILE... : TERM them all, wait until each is gone (after 30 s: KILL, as a last resort)
stop_daemons() {
    local entry pid pids=() names=() i
    for entry in "$@"; do
        pid=$(pid_of "${entry#*:}" "${entry%%:*}") || continue
        say "stopping ${entry%%:*} (pid ${pid})"
        kill -TERM "${pid}" 2>/dev/null && pids+=("${pid}") && names+=("${entry%%:*}")
    done
    for i in "${!pids[@]}"; do
        for _ in $(seq 300); do
            kill -0 "${pids[i]}" 2>/dev/null || continue 2
            sleep 0.1
        done
        say "${names[i]} (pid ${pids[i]}) ignored SIGTERM for 30 s; sending SIGKILL"
        kill -KILL "${pids[i]}" 2>/dev/null
        while kill -0 "${pids[i]}" 2>/dev/null; do sleep 0.1; done
    done
}

# Each takes about 2 s to exit: stop the Slurm daemons together, munged (their authentication) after them.
slurm_daemons=("slurmctld:${state_dir}/run/slurmctld.pid")
for pidfile in "${state_dir}"/run/slurmd-*.pid; do
    [ -e "${pidfile}" ] && slurm_daemons+=("slurmd:${pidfile}")
done
stop_daemons "${slurm_daemons[@]}"
stop_daemons "munged:${state_dir}/munge/munged.pid"
say "stopped (${state_dir})"
