#!/usr/bin/env bash
# The thesis' setting simulated: its 90-task (65% light, 27% medium, 8% heavy) and 60-task (83%
# medium, 17% heavy) mixes on 4 H200s, every job at least 120 s alone, in the five benchmark modes,
# with the 2x H200 run's catalogue (iteration time, start-up, SMACT, peak per workload; power fit).
#   bench/real-trace/sim_4gpu.sh [COLO] [OUT_DIR]      (default: build/bin/colo, /tmp/colo-sim-4gpu)
# Variants (each with seeds 1-3; gaps scaled so the load is the thesis trace's, `colo sim --describe`:
# 2.27x the GPUs for the 90-task trace, 4.55x for the 60-task one):
#   *-weighted  each class's duration range gives it the thesis' share of the GPU time
#               (90-task: light 34%, medium 49%, heavy 17%; 60-task: medium 76%, heavy 24%)
#   *-long      every job 120-600 s, whatever its class
#   *-short     every job 20-45 s (the first 2x H200 benchmark's lengths), same load
# Writes OUT_DIR/VARIANT-sSEED/{trace.json, trace.csv, MODE.json, table.md}.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
colo=${1:-build/bin/colo}
out=${2:-/tmp/colo-sim-4gpu}
catalogue="$here/results-h200x2-2026-11-21/sim/catalogue.json"
solo="$here/results-h200-2026-11-21/solo.json"
m90=0.65,0.27,0.08
m60=0,0.83,0.17
variants=(
  "thesis90-weighted $m90 0.26 light=120:240,medium=480:840,heavy=480:1000"
  "thesis60-weighted $m60 0.196 medium=480:840,heavy=840:1280"
  "thesis90-long $m90 0.25 light=120:600,medium=120:600,heavy=120:600"
  "thesis60-long $m60 0.112 medium=120:600,heavy=120:600"
  "thesis90-short $m90 0.030 light=20:45,medium=20:45,heavy=20:45"
  "thesis60-short $m60 0.0136 medium=20:45,heavy=20:45"
)
for v in "${variants[@]}"; do
  set -- $v
  name=$1 mix=$2 gaps=$3 seconds=$4
  jobs=${name:6:2}
  for seed in 1 2 3; do
    dir="$out/$name-s$seed"
    mkdir -p "$dir"
    python3 "$here/make_trace.py" "$solo" --catalogue "$catalogue" --jobs "$jobs" --mix "$mix" \
      --gap-scale "$gaps" --class-seconds "$seconds" --seed "$seed" -o "$dir/trace.json" > /dev/null
    python3 "$here/sim_predict.py" "$dir/trace.json" --catalogue "$catalogue" --server h200x4 \
      --colo "$colo" --out "$dir" > "$dir/table.md"
    load=$("$colo" sim --trace "$dir/trace.csv" --server h200x4 --describe | tail -1 |
           grep -o '[0-9.]*x the' | cut -dx -f1)
    echo "## $name, seed $seed (load ${load}x the 4 GPUs)"
    cat "$dir/table.md"
  done
done
