# Shared by start.sh and stop.sh (sourced, not run): where the cluster's state lives, and the
# error and root checks both scripts make. Defaults are set here and nowhere else.

# The daemons and runuser live in sbin, which a root shell's PATH may lack.
PATH="$PATH:/usr/sbin:/sbin"

# PID files of the daemons start.sh started; /run is cleared at boot, as the daemons are.
SLURM_STATE_DIR=${SCALPEL_SLURM_STATE:-/run/scalpel-slurm}
SLURM_PARTITION=${SCALPEL_SLURM_PARTITION:-debug}
SLURM_CONF=/etc/slurm/slurm.conf
# The first line of every slurm.conf start.sh writes: a slurm.conf without it belongs to someone
# else, and start.sh leaves it alone.
SLURM_CONF_MARK="# Written by scalpel-executor's scripts/slurm/start.sh; stop with scripts/slurm/stop.sh"

die() {
  echo "$(basename "$0"): $*" >&2
  exit 1
}

require_root() {  # why: what the script does that needs root
  [ "$(id -u)" = 0 ] || die "must run as root ($1); try: sudo $0"
}

# True when the process with the PID in file $1 is alive and is the program $2, so that a PID
# reused by another program after a reboot or a crash is never signalled.
recorded_daemon_alive() {
  local file=$1 name=$2 pid
  [ -s "$file" ] || return 1
  pid=$(cat "$file")
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$name" ]
}
