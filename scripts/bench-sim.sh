#!/usr/bin/env bash
# Simulator throughput: a 100,000-job synthetic Philly-like trace on 256 simulated 8-GPU H100 servers,
# every policy, one core. Prints wall time and jobs/s per policy (from --timings) and the results table.
#   scripts/bench-sim.sh [BUILD_DIR] [CLUSTER]   CLUSTER: queue (default), fifo or per-server
set -euo pipefail
build=${1:-build}
cluster=${2:-queue}
"$build/bin/colo" sim --trace synthetic --jobs 100000 --rate 400 --seed 1 \
  --server h100x8 --servers 256 --cluster "$cluster" \
  --compare exclusive,round-robin,first-fit,best-fit,worst-fit,least-utilized,consolidate --timings
