#!/usr/bin/env bash
# Start a single-host Slurm cluster on this machine: munged, slurmctld and slurmd as plain daemons
# (no systemd), one node with every CPU, one partition. Installs the Debian packages when Slurm is
# missing, and waits until the node accepts jobs. stop.sh ends what this script started.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

usage() {
  cat <<USAGE
Usage: sudo $0 [--partition NAME] [--force] [-h|--help]

Start a single-host Slurm cluster for trying ScalpelExecutor with Parsl's SlurmProvider and for
the Slurm integration tests. Needs root. When slurmctld, slurmd, sbatch or munged is missing it
installs the packages slurmctld, slurmd, slurm-client and munge with apt-get.

  --partition NAME  name of the partition (default: $SLURM_PARTITION, or \$SCALPEL_SLURM_PARTITION)
  --force           replace a $SLURM_CONF this script did not write
  -h, --help        show this help

Writes $SLURM_CONF, records the PIDs of the daemons it starts in
$SLURM_STATE_DIR (\$SCALPEL_SLURM_STATE) and prints the node and partition when the node is idle.
Stop with: sudo $HERE/stop.sh
USAGE
}

force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --partition) [ $# -ge 2 ] || die "--partition needs a name, e.g. --partition debug"
                 SLURM_PARTITION=$2; shift 2;;
    --force) force=1; shift;;
    -h|--help) usage; exit 0;;
    *) die "unknown argument '$1'; see $0 --help";;
  esac
done
require_root "it installs packages, writes /etc/slurm and /etc/munge and starts daemons"

NODE=$(hostname -s)   # slurmd finds its NodeName line by the short host name
CPUS=$(nproc)
mkdir -p "$SLURM_STATE_DIR"

install_packages() {
  local missing=0 program
  for program in slurmctld slurmd sbatch munged; do
    command -v "$program" >/dev/null || missing=1
  done
  [ "$missing" = 1 ] || return 0
  command -v apt-get >/dev/null \
    || die "Slurm is not installed and apt-get is not available: install slurmctld, slurmd, the Slurm client commands and munge with this system's package manager, then run $0 again"
  echo "installing slurmctld slurmd slurm-client munge with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed (see above); Slurm was not installed"
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null \
    || die "apt-get could not install slurmctld slurmd slurm-client munge (see above)"
}

# munge authenticates every message between Slurm's daemons and its commands.
start_munge() {
  install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then   # the package's install script normally creates it
    mungekey --create --keyfile=/etc/munge/munge.key
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  if ! munge -n >/dev/null 2>&1; then
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged   # daemonizes; writes /run/munge/munged.pid
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
    cp /run/munge/munged.pid "$SLURM_STATE_DIR/munged.pid"
  fi
  munge -n | unmunge >/dev/null || die "munge does not work; see /var/log/munge/munged.log"
}

write_slurm_conf() {
  if [ -e "$SLURM_CONF" ] && [ "$(head -n 1 "$SLURM_CONF")" != "$SLURM_CONF_MARK" ] && [ "$force" = 0 ]; then
    die "$SLURM_CONF exists and was not written by this script; it may belong to a real cluster. Move it away, or run $0 --force to replace it"
  fi
  install -d -o slurm -g slurm -m 0755 /var/lib/slurm/slurmctld /var/log/slurm /run/slurm
  install -d -o root -g root -m 0755 /var/lib/slurm/slurmd /etc/slurm
  local memory
  memory=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  cat > "$SLURM_CONF" <<CONF
$SLURM_CONF_MARK
ClusterName=local
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
# No cgroup plugins, so that it runs in containers without systemd or a delegated cgroup tree
# (with them the first job fails: "cgroup namespace 'freezer' not mounted", and the node drains).
# Jobs are therefore not confined to the CPUs Slurm allocated them.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# No accounting: sacct fails, and Parsl's SlurmProvider falls back to squeue.
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
KillWait=5
Waittime=0
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${memory} State=UNKNOWN
PartitionName=${SLURM_PARTITION} Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
CONF
  chmod 0644 "$SLURM_CONF"
}

start_slurm_daemons() {
  if ! scontrol ping 2>/dev/null | grep -q 'is UP'; then
    rm -f /run/slurm/slurmctld.pid
    slurmctld -c   # -c: empty state (no jobs left from an earlier run); drops to SlurmUser
    for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1; done
    [ -s /run/slurm/slurmctld.pid ] && cp /run/slurm/slurmctld.pid "$SLURM_STATE_DIR/slurmctld.pid"
  fi
  scontrol ping 2>/dev/null | grep -q 'is UP' \
    || die "slurmctld did not come up; see /var/log/slurm/slurmctld.log"

  if [ ! -s /run/slurm/slurmd.pid ] || ! kill -0 "$(cat /run/slurm/slurmd.pid)" 2>/dev/null; then
    rm -f /run/slurm/slurmd.pid
    slurmd
    for _ in $(seq 50); do [ -s /run/slurm/slurmd.pid ] && break; sleep 0.1; done
    [ -s /run/slurm/slurmd.pid ] || die "slurmd did not start; see /var/log/slurm/slurmd.log"
    cp /run/slurm/slurmd.pid "$SLURM_STATE_DIR/slurmd.pid"
  fi
}

# The node registers as idle within a second or two; a node that comes up "down" (it was down in
# a state slurmctld kept) is resumed once.
wait_for_idle_node() {
  local state="" attempt
  for attempt in $(seq 300); do
    state=$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null || true)
    case "$state" in idle*|mix*|alloc*) break;; esac
    [ "$attempt" = 100 ] && { scontrol update nodename="$NODE" state=resume 2>/dev/null || true; }
    sleep 0.1
  done
  case "$state" in
    idle*|mix*|alloc*) ;;
    *) die "node $NODE is not usable (state '$state'); see /var/log/slurm/slurmd.log and slurmctld.log";;
  esac
  echo "slurm up: node=$NODE cpus=$CPUS partition=$SLURM_PARTITION state=$state"
}

install_packages
write_slurm_conf   # first: it refuses a slurm.conf of another cluster before anything starts
start_munge
start_slurm_daemons
wait_for_idle_node
