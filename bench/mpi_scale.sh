#!/usr/bin/env bash
# Trials per second against runner ranks under mpirun on one machine, with a
# simulated runner (--simulate-measure: a fixed delay per candidate, no
# compiler), so that what is measured is tensortune's distribution of work,
# not the machine's compiler (docs/mpi.md#scaling).
#
# usage: bench/mpi_scale.sh [DELAY_MS] [TRIALS] [MAX_RUNNERS]   (defaults 100 64 8)
set -euo pipefail
delay=${1:-100}
trials=${2:-64}
max=${3:-8}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tt=${TENSORTUNE:-$root/build/tensortune}
work=$(mktemp -d "$root/build/mpi_scale.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Open MPI refuses root unless told (CI and containers run as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores;" \
     "$delay ms per candidate, $trials trials"
printf '%-13s %9s %10s\n' "runner ranks" "trials/s" "of linear"
for ((runners = 1; runners <= max; runners *= 2)); do
  rm -f "$work/log.jsonl"
  mpirun -n $((runners + 1)) --oversubscribe "$tt" tune --workload matmul --args 64,64,64 \
      --trials "$trials" --log "$work/log.jsonl" --policy random --simulate-measure "$delay" \
      --runners-per-host "$runners" --parallelism "$runners" --json 2>/dev/null |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
rate = r['trials'] / r['elapsed_s']
print(f'{$runners:<13} {rate:9.1f} {rate / ($runners * 1000.0 / $delay):10.2f}')"
done
