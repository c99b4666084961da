#!/usr/bin/env bash
# Stop the single-host Slurm cluster that start.sh started: cancel its jobs, then end slurmd,
# slurmctld and munged by the PIDs start.sh recorded. A daemon start.sh found already running
# (and so did not record) is left alone, and nothing is ever ended by name.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"

usage() {
  cat <<USAGE
Usage: sudo $0 [--purge] [-h|--help]

Stop the Slurm cluster started by $HERE/start.sh.

  --purge     also delete Slurm's saved state, spool and log files
  -h, --help  show this help

Reads the PIDs in $SLURM_STATE_DIR (\$SCALPEL_SLURM_STATE). The installed packages and
$SLURM_CONF stay; start.sh starts the cluster again in about a second.
USAGE
}

purge=0
while [ $# -gt 0 ]; do
  case "$1" in
    --purge) purge=1; shift;;
    -h|--help) usage; exit 0;;
    *) die "unknown argument '$1'; see $0 --help";;
  esac
done
require_root "it signals daemons that run as root, slurm and munge"

stop_recorded() {  # name: ends the daemon whose PID start.sh wrote to $SLURM_STATE_DIR/name.pid
  local file="$SLURM_STATE_DIR/$1.pid" pid
  if recorded_daemon_alive "$file" "$1"; then
    pid=$(cat "$file")
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$1 ($pid) did not stop in 10 s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
  fi
  rm -f "$file"
}

# Cancel the jobs first, while slurmd still runs to end their processes.
if recorded_daemon_alive "$SLURM_STATE_DIR/slurmctld.pid" slurmctld; then
  jobs=$(squeue -h -o %i 2>/dev/null || true)
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086  # one job id per word
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 100); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
fi

stop_recorded slurmd
stop_recorded slurmctld   # its helper slurmscriptd exits with it
stop_recorded munged

if [ "$purge" = 1 ]; then
  rm -rf /var/lib/slurm/slurmctld/* /var/lib/slurm/slurmd/* /var/log/slurm/*.log
fi
echo "slurm stopped"
