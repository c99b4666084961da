#!/bin/bash
# Run a dispatch example under HTEX, ScalpelExecutor (its defaults), ScalpelExecutor(pin_driver="auto")
# and ScalpelExecutor(pin_driver=None) in turn,
# REPEATS times, each a fresh process; one JSON line per run, with the whole process's wall seconds.
# Scalpel's profile store is a temporary one (the user's own store is not written).
#
#   bash examples/dispatch/compare.sh sweep.py 3 --points 3000
#   bash examples/dispatch/compare.sh chain.py 3 --samples 1000
#   bash examples/dispatch/compare.sh tiles.py 3 --tiles 2000 --pixels 1024
#   bash examples/dispatch/compare.sh bootstrap.py 3 --resamples 3000
set -euo pipefail
script=$1 repeats=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for repeat in $(seq "$repeats"); do
  for kind in htex scalpel scalpel-pin scalpel-unpinned; do
    begin=$(date +%s.%N)
    line=$(SCALPEL_PROFILE_STORE="$scratch/$kind.sqlite" python "$here/$script" --executor "$kind" \
           --run-dir "$scratch/run-$repeat-$kind" "$@" 2>/dev/null | tail -1)
    end=$(date +%s.%N)
    echo "{\"repeat\": $repeat, \"wall\": $(echo "$end - $begin" | bc), \"run\": $line}"
  done
done
