#!/usr/bin/env bash
# Whether two builds of colo answer alike: `colo estimate --json` (every estimator) on every
# profile kept in bench/estimate (each results folder's cases-and-traces archives) with each GPU
# calibration shipped in data/gpu-calibration, byte for byte but for each estimator's own latency
# ("micros"). A change meant to make estimates
# faster, not different, is checked with it against the commit before:
#
#   bench/estimate/same-answers.sh BUILD_DIR BASE_BUILD_DIR
#
# Prints how many answers were compared and each that differs; exits 1 when any does.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR BASE_BUILD_DIR" >&2; exit 2; }
this=$1/bin/colo
base=$2/bin/colo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0
while IFS= read -r archive; do
  n=$((n + 1))
  mkdir -p "$work/set$n"
  tar xzf "$archive" -C "$work/set$n"
done < <(find "$root/bench/estimate" -name '*cases-and-traces.tgz' | sort)
mapfile -t gpus < <(for c in "$root"/data/gpu-calibration/*.json; do
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["gpu"])' "$c"
done)
compared=0
differ=0
while IFS= read -r profile; do
  for gpu in "${gpus[@]}"; do
    a=$("$this" estimate "$profile" --gpu "$gpu" --json 2>&1 | grep -v '"micros":' || true)
    b=$("$base" estimate "$profile" --gpu "$gpu" --json 2>&1 | grep -v '"micros":' || true)
    compared=$((compared + 1))
    if [ "$a" != "$b" ]; then
      differ=$((differ + 1))
      echo "differs: ${profile#"$work"/} --gpu $gpu"
      diff <(echo "$b") <(echo "$a") | head -20
    fi
  done
done < <(find "$work" -path '*cases/*.json' | sort)
echo "$compared answers compared (${#gpus[@]} GPU calibrations), $differ differ"
[ "$differ" -eq 0 ]
