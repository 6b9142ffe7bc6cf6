#!/usr/bin/env bash
# The trace estimator's latency on this machine, over every committed evaluation profile (the 39
# cases and the 15 held out): per profile the time of one estimate once its trace is loaded, and of
# a job's first estimate (read the trace, parse it, replay it); then the median and the largest.
#   bench/estimate/latency.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
results=$root/bench/estimate/results-h200-2026-11-21
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar xzf "$results/eval-cases-and-traces.tgz" -C "$work"
tar xzf "$results/heldout/heldout-cases-and-traces.tgz" -C "$work"
"$build/bin/colo_estimate_bench" --benchmark_filter='^(estimate|first)/' --benchmark_min_time=0.2 \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json \
  "$work"/eval2/cases/*.json "$work"/heldout/cases/*.json > "$work/bench.json"
python3 - "$work/bench.json" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
medians = {r["run_name"]: r for r in runs if r.get("aggregate_name") == "median"}
for kind, label in (("estimate", "one estimate, trace loaded"), ("first", "first estimate: read, parse, replay")):
    rows = sorted(((r["real_time"], name.split("/", 1)[1], r.get("events", 0))
                   for name, r in medians.items() if name.startswith(kind + "/")))
    times = [t for t, *_ in rows]
    over = [n for t, n, _ in rows if t > 1000]
    print(f"{label}: {len(rows)} profiles, median {statistics.median(times):.0f} us, "
          f"max {rows[-1][0]:.0f} us ({rows[-1][1]}), over 1 ms: {len(over)}")
    for t, name, events in rows[-3:]:
        print(f"  {name}: {t:.0f} us" + (f", {events:.0f} events" if events else ""))
PY
