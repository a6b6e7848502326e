#!/usr/bin/env bash
# Brings up a private Slurm cluster on this machine (Debian's slurmctld + slurmd + munge), for tests and for
# trying the Slurm backend without a real cluster. Needs root (slurmd runs jobs as the submitting user).
#
#   tools/slurm_start.sh [--nodes N] [--state_dir DIR] [--port BASE]
#   eval "$(tools/slurm_start.sh --nodes 2)"      # sets SLURM_CONF for sbatch/squeue/srun in this shell
#
#   --nodes N        slurmd daemons on this machine, named n1..nN (2 gives a multi-node cluster for DDP tests)
#   --state_dir DIR  everything lives here: slurm.conf, a private munged, spool, logs, pid files
#                    (default: ${TMPDIR:-/tmp}/slurm-local)
#   --port BASE      slurmctld listens on BASE, slurmd i on BASE+i (default 16817)
#
# The only line on stdout is "export SLURM_CONF=<DIR>/slurm.conf"; progress goes to stderr. Waits until every
# node is up. Idempotent: when the cluster of DIR is already running it says so and exits 0.
# Stop it with tools/slurm_stop.sh --state_dir DIR.
set -euo pipefail

nodes=1
state_dir="${TMPDIR:-/tmp}/slurm-local"
port=16817
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) nodes=$2; shift 2 ;;
        --state_dir|--state-dir) state_dir=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) echo "$0: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ "${nodes}" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --nodes must be a positive integer, got '${nodes}'" >&2; exit 2; }
[[ "${port}" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --port must be a port number, got '${port}'" >&2; exit 2; }
[[ "${state_dir}" =~ [[:space:]] ]] && { echo "$0: --state_dir cannot contain spaces (slurm.conf cannot express them)" >&2; exit 2; }

say() { echo "slurm_start: $*" >&2; }
fail() { echo "slurm_start: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "must run as root (slurmd starts jobs as the submitting user)"
for prog in munged munge unmunge slurmctld slurmd sbatch sinfo scontrol squeue runuser; do
    command -v "${prog}" >/dev/null 2>&1 || fail "'${prog}' not found: apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge"
done
id munge >/dev/null 2>&1 || fail "no 'munge' user: the munge package is not installed properly"

mkdir -p "${state_dir}"
state_dir=$(cd "${state_dir}" && pwd)
conf="${state_dir}/slurm.conf"
munge_dir="${state_dir}/munge"
munge_socket="${munge_dir}/munge.socket"
export SLURM_CONF="${conf}"

# alive PIDFILE PROGRAM: the pid in PIDFILE is a running PROGRAM (guards against a stale, reused pid)
alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "${pid}" ] && kill -0 "${pid}" 2>/dev/null && grep -qa "$2" "/proc/${pid}/cmdline" 2>/dev/null
}

node_names() { local i; for ((i = 1; i <= $1; i++)); do echo "n${i}"; done; }

any_running=false
daemons=("munged:${munge_dir}/munged.pid" "slurmctld:${state_dir}/run/slurmctld.pid")
for n in $(node_names "${nodes}"); do daemons+=("slurmd:${state_dir}/run/slurmd-${n}.pid"); done
for entry in "${daemons[@]}"; do
    alive "${entry#*:}" "${entry%%:*}" && any_running=true
done

if ${any_running}; then
    # Never rewrite the config under running daemons; it must already describe the requested cluster.
    configured=$(sed -n 's/^# nodes=\([0-9]*\)$/\1/p' "${conf}" 2>/dev/null || true)
    [ "${configured}" = "${nodes}" ] || \
        fail "a cluster with ${configured:-?} node(s) is running in ${state_dir}; stop it first: tools/slurm_stop.sh --state_dir ${state_dir}"
else
    # --- fresh configuration ---------------------------------------------------------------------------------
    mkdir -p "${state_dir}"/{ctld,log,run} "${munge_dir}"
    for n in $(node_names "${nodes}"); do mkdir -p "${state_dir}/spool/${n}"; done
    # munged runs as user munge and checks that its directories are not writable by others.
    chmod 0755 "${state_dir}"
    chown munge:munge "${munge_dir}"
    chmod 0755 "${munge_dir}"
    if [ ! -s "${munge_dir}/munge.key" ]; then
        mungekey --create --keyfile "${munge_dir}/munge.key" 2>/dev/null || \
            dd if=/dev/urandom of="${munge_dir}/munge.key" bs=1024 count=1 status=none
    fi
    chown munge:munge "${munge_dir}/munge.key"
    chmod 0600 "${munge_dir}/munge.key"

    # Cores and memory as slurmd sees them; the nodes share this machine, so memory is split between them.
    hw=$(slurmd -C | head -n 1)
    field() { echo "${hw}" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
    memory=$(( $(field RealMemory) * 85 / 100 / nodes ))
    last_port=$((port + nodes))
    [ "${nodes}" -eq 1 ] && node_list=n1 || node_list="n[1-${nodes}]"
    [ "${nodes}" -eq 1 ] && node_ports=$((port + 1)) || node_ports="$((port + 1))-${last_port}"

    cat > "${conf}.tmp" <<EOF
# Private Slurm cluster written by tools/slurm_start.sh; all state under ${state_dir}.
# nodes=${nodes}
ClusterName=localcluster
SlurmctldHost=localhost
SlurmctldPort=${port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start again (cred_expire + 1 s;
# Slurm's default 120 s would make every requeue take two minutes; 5 s, the minimum, is ample on one machine).
AuthInfo=socket=${munge_socket},cred_expire=5
StateSaveLocation=${state_dir}/ctld
SlurmdSpoolDir=${state_dir}/spool/%n
SlurmctldPidFile=${state_dir}/run/slurmctld.pid
SlurmdPidFile=${state_dir}/run/slurmd-%n.pid
SlurmctldLogFile=${state_dir}/log/slurmctld.log
SlurmdLogFile=${state_dir}/log/slurmd-%n.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
# Without batch_sched_delay=0 only a couple of short jobs start every few seconds; the short intervals let a
# requeued job start as soon as it may (it waits cred_expire + 1 s) instead of at the next periodic pass.
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,bf_interval=1,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Jobs here die quickly on SIGTERM; do not wait the default 30 s before SIGKILL.
KillWait=5
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=${state_dir}/log/jobcomp.log
MinJobAge=300
NodeName=${node_list} NodeHostname=localhost NodeAddr=127.0.0.1 Port=${node_ports} CPUs=$(field CPUs) Boards=$(field Boards) SocketsPerBoard=$(field SocketsPerBoard) CoresPerSocket=$(field CoresPerSocket) ThreadsPerCore=$(field ThreadsPerCore) RealMemory=${memory} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    mv "${conf}.tmp" "${conf}"
fi

# --- daemons (each started only when not already running) ----------------------------------------------------
show_log() { [ -f "$1" ] && { echo "--- last lines of $1:" >&2; tail -n 15 "$1" >&2; }; return 0; }

if ! alive "${munge_dir}/munged.pid" munged; then
    say "starting munged"
    # munged refuses to run as root.
    runuser -u munge -- munged --socket="${munge_socket}" --key-file="${munge_dir}/munge.key" \
        --pid-file="${munge_dir}/munged.pid" --log-file="${munge_dir}/munged.log" \
        --seed-file="${munge_dir}/munged.seed" || { show_log "${munge_dir}/munged.log"; fail "munged did not start"; }
fi
munge -n -S "${munge_socket}" | unmunge -S "${munge_socket}" >/dev/null || fail "munge credentials do not round-trip"

if ! alive "${state_dir}/run/slurmctld.pid" slurmctld; then
    say "starting slurmctld (port ${port})"
    slurmctld -f "${conf}" || { show_log "${state_dir}/log/slurmctld.log"; fail "slurmctld did not start"; }
fi
for n in $(node_names "${nodes}"); do
    if ! alive "${state_dir}/run/slurmd-${n}.pid" slurmd; then
        say "starting slurmd ${n}"
        slurmd -f "${conf}" -N "${n}" || { show_log "${state_dir}/log/slurmd-${n}.log"; fail "slurmd ${n} did not start"; }
    fi
done

# --- wait until every node takes jobs ----------------------------------------------------------------------------
deadline=$((SECONDS + 60))
while true; do
    states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u || true)
    busy_or_idle=$(echo "${states}" | grep -cE ' (idle|mixed|allocated|completing)$' || true)
    [ -n "${states}" ] && [ "${busy_or_idle}" -eq "${nodes}" ] && break
    # A node drained or downed by an earlier unclean stop stays so across restarts until resumed.
    for n in $(echo "${states}" | awk '$2 ~ /drain|down/ && $2 !~ /\*/ { print $1 }'); do
        scontrol update nodename="${n}" state=resume 2>/dev/null || true
    done
    if [ "${SECONDS}" -ge "${deadline}" ]; then
        echo "${states}" >&2
        show_log "${state_dir}/log/slurmctld.log"
        for n in $(node_names "${nodes}"); do show_log "${state_dir}/log/slurmd-${n}.log"; done
        fail "nodes not idle after 60 s"
    fi
    sleep 0.2
done

if ${any_running}; then
    say "already running (${nodes} node(s), ${state_dir})"
else
    say "ready: ${nodes} node(s), state in ${state_dir}"
fi
echo "export SLURM_CONF=${conf}"
