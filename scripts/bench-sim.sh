#!/usr/bin/env bash
# Simulator throughput: a 100,000-job synthetic Philly-like trace on 256 simulated 8-GPU H100 servers,
# every policy, one core. Prints wall time and jobs/s per policy (from --timings) and the results table.
set -euo pipefail
build=${1:-build}
"$build/bin/colo" sim --trace synthetic --jobs 100000 --rate 400 --seed 1 \
  --server h100x8 --servers 256 \
  --compare exclusive,round-robin,first-fit,best-fit,worst-fit,least-utilized,consolidate --timings
