#!/usr/bin/env bash
# The trace estimator's latency on this machine, over every profile kept in bench/estimate (each
# results folder's cases-and-traces archives): per profile the CPU time of one estimate once its
# trace is loaded (Google Benchmark, colo_estimate_bench), then the median and the largest.
#
#   bench/estimate/latency.sh [BUILD_DIR] [--vs BASE_BUILD_DIR] [--rounds N] [--instructions N]
#
# --vs times a second build (another commit's) in the same run, the two alternating round by
# round, and prints each profile's ratio (this build's time over the base's): ratios taken side by
# side stay meaningful on a shared machine whose speed drifts. --instructions N counts with
# valgrind's callgrind the instructions of one estimate (`colo estimate --repeat 11` less
# `--repeat 1`, over 10) on the N profiles slowest in the first build, in both builds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build
base=""
rounds=3
instructions=0
while [ $# -gt 0 ]; do
  case $1 in
    --vs) base=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --instructions) instructions=$2; shift 2 ;;
    *) build=$1; shift ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Each archive into a folder of its own; every profile under a name that says which set it is of.
n=0
while IFS= read -r archive; do
  n=$((n + 1))
  mkdir -p "$work/set$n"
  tar xzf "$archive" -C "$work/set$n"
  set_name=$(dirname "${archive#"$root/bench/estimate/"}" | tr / -)
  for summary in $(find "$work/set$n" -path '*cases/*.json'); do
    cp "$summary" "$(dirname "$summary")/$set_name--$(basename "$summary")"
    rm "$summary"
  done
done < <(find "$root/bench/estimate" -name '*cases-and-traces.tgz' | sort)
find "$work" -path '*cases/*--*.json' | sort > "$work/profiles"
python3 - "$work" "$build" "$base" "$rounds" "$instructions" <<'PY'
import json, os, statistics, subprocess, sys
work, build, base, rounds, instructions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
profiles = open(os.path.join(work, "profiles")).read().split()
builds = {"this": build} | ({"base": base} if base else {})
times = {name: {} for name in builds}
for _ in range(rounds):
    for name, folder in builds.items():
        out = subprocess.run([os.path.join(folder, "bin", "colo_estimate_bench"), "--benchmark_filter=^estimate/",
                              "--benchmark_min_time=0.05", "--benchmark_format=json", *profiles],
                             capture_output=True, text=True, check=True).stdout
        for run in json.loads(out)["benchmarks"]:
            times[name].setdefault(run["name"].split("/", 1)[1], []).append(run["cpu_time"])
print(f"{len(profiles)} profiles, {rounds} rounds" + (", alternating with the base" if base else ""))
for name, folder in builds.items():
    median = {p: statistics.median(v) for p, v in times[name].items()}
    ranked = sorted(median.items(), key=lambda kv: kv[1])
    over = sum(t > 1000 for _, t in ranked)
    print(f"{name} ({folder}): one estimate, trace loaded: median {statistics.median(median.values()):.0f} us, "
          f"max {ranked[-1][1]:.0f} us ({ranked[-1][0]}), over 1 ms: {over}, over 2 ms: "
          f"{sum(t > 2000 for _, t in ranked)}")
    for profile, t in ranked[-3:]:
        print(f"  {profile}: {t:.0f} us")
if base:
    ratios = {p: statistics.median(a / b for a, b in zip(times["this"][p], times["base"][p])) for p in times["this"]}
    ranked = sorted(ratios.items(), key=lambda kv: kv[1])
    print(f"ratio this/base per profile: median {statistics.median(ratios.values()):.2f}, "
          f"best {ranked[0][1]:.2f} ({ranked[0][0]}), worst {ranked[-1][1]:.2f} ({ranked[-1][0]})")
if instructions:
    slowest = sorted(times["this"], key=lambda p: -statistics.median(times["this"][p]))[:instructions]
    def count(folder, profile, repeat):
        run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                              os.path.join(folder, "bin", "colo"), "estimate", profile, "--estimator", "trace",
                              "--gpu", "H100", "--repeat", str(repeat)], capture_output=True, text=True)
        line = [l for l in run.stderr.splitlines() if "refs:" in l][-1]
        return int(line.split()[-1].replace(",", ""))
    for profile in slowest:
        path = next(p for p in profiles if os.path.basename(p) == profile + ".json")
        counts = {name: (count(folder, path, 11) - count(folder, path, 1)) / 10 for name, folder in builds.items()}
        print(f"instructions per estimate, {profile}: " +
              ", ".join(f"{name} {c / 1e6:.1f} M" for name, c in counts.items()) +
              (f" (ratio {counts['this'] / counts['base']:.2f})" if base else ""))
PY
