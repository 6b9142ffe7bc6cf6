#!/usr/bin/env bash
# Simulator throughput: a 100,000-job synthetic Philly-like trace on 256 simulated 8-GPU H100 servers,
# every policy, one core. Prints, per policy, the wall and CPU time of Simulate() and jobs/s of each
# (from --timings), and the results table.
#   scripts/bench-sim.sh [BUILD_DIR] [CLUSTER]   CLUSTER: queue (default), fifo or per-server
# With --instructions first: instead, the instructions each policy's Simulate() runs per job, counted
# by valgrind's callgrind (the trace's generation excluded): the same on any machine for one build,
# where times measure the machine as much as the program. About a minute per policy.
#   scripts/bench-sim.sh --instructions [BUILD_DIR] [CLUSTER] [JOBS]
set -euo pipefail
instructions=false
if [[ ${1:-} == --instructions ]]; then
  instructions=true
  shift
fi
build=${1:-build}
cluster=${2:-queue}
jobs=${3:-100000}
policies="exclusive round-robin first-fit best-fit worst-fit least-utilized consolidate"
common=(--trace synthetic --jobs "$jobs" --rate 400 --seed 1 --server h100x8 --servers 256
        --cluster "$cluster")
if ! $instructions; then
  "$build/bin/colo" sim "${common[@]}" --compare "${policies// /,}" --timings
  exit
fi
command -v valgrind > /dev/null || { echo "bench-sim.sh: --instructions needs valgrind" >&2; exit 2; }
for policy in $policies; do
  count=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
            --toggle-collect='colo::Simulate(*' "$build/bin/colo" sim "${common[@]}" \
            --policy "$policy" 2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
  echo "$policy: $count instructions in Simulate(), $((count / jobs)) a job"
done
