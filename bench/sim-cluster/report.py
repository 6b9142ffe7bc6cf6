#!/usr/bin/env python3
"""Turns bench/sim-cluster/run.sh's CSVs into the markdown tables of results.md."""
import csv
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
RATES = {(256, "0.8"): 515, (256, "1.0"): 681, (256, "1.2"): 858,
         (2048, "0.8"): 10836, (2048, "1.0"): 16818, (2048, "1.2"): 24894}
LABELS = {
    "exclusive": "(a) Slurm alone, whole GPUs",
    "shards:n=2,est=none": "(b) Slurm, 2 shards/GPU, no estimate",
    "shards:n=4,est=none": "(b) Slurm, 4 shards/GPU, no estimate",
    "worst-fit:est=noisy:0.067:0.046": "(c) colo worst-fit, colo's estimator",
    "worst-fit:est=oracle": "(d) colo worst-fit, oracle",
}


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def hours(s):
    return float(s) / 3600


def minutes(s):
    return float(s) / 60


HEADER = """# The cluster layer at scale (simulated): Slurm-like cluster queue over colo per server

Date 2026-11-22. Machine: the 2-core development VM, Debian 12, GCC 12, `-O3` (Release build),
shared with other work while it ran (wall times below vary by ±30% from run to run). Produced by

```sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2
bench/sim-cluster/run.sh build        # writes bench/sim-cluster/out/*.csv and this file
```

which runs, for each GPU (`--server h100x8`: 8× H100-80GB; `a100x8`: 8× A100-40GB, the GPU the
workload catalogue was measured on), each size (`--servers 256` and `2048`) and each load:

```sh
colo sim --trace synthetic --jobs 100000 --rate RATE --seed 1 --server SERVER --servers N \\
  --compare exclusive,shards:n=2,est=none,shards:n=4,est=none,worst-fit:est=noisy:0.067:0.046,worst-fit:est=oracle --csv
colo sim ... --node-choice best-fit --compare exclusive,shards:n=2,est=none,shards:n=4,est=none --csv
colo sim ... --cluster per-server --policy exclusive --csv
```

- (a) Slurm alone, whole GPUs: `exclusive` under the cluster queue. (b) Slurm with shards and no
  estimates: `shards:n=2` / `shards:n=4` (every job takes one shard on each of its GPUs; jobs on a
  GPU are time-sliced; a job that crashes out of memory goes back to the queue at its place, up to
  Slurm's MaxBatchRequeue of 5, then is held: counted under failed). (c) colo per server, worst-fit,
  with its estimator, modelled as planning with each job's true peak times e^N(0.113, 0.067) (the
  spread measured for what colo plans with: median +12%, p90 +22%; 4.6% of jobs come out below their
  peak; 0 of 53 did in the measurements); (d) the same with an oracle (exact peaks).
- Node choice: the cluster queue sends a job to the server with the most free planned memory among
  those that can start it (idle GPUs for exclusive, free shards for shards); rows marked "best fit"
  use Slurm's native choice instead, the least free server that can start it (`--node-choice
  best-fit`). At most 100 waiting jobs are looked at per round (Slurm's default_queue_depth).
- Load: the mean GPU demand while the jobs arrive, if each started on arrival and ran alone, over
  the cluster's GPUs (`colo sim --describe`). Philly's durations are heavy-tailed (most GPU-hours
  are in jobs of days), so 100,000 jobs load 16,384 GPUs only if they arrive within hours: the
  2,048-server runs are bursts.
- JCT and wait are over the jobs that succeeded; failed counts jobs held after 5 requeues (shards)
  or refused at submission. GPU-h lost: GPU time of attempts that crashed out of memory.

"""
print(HEADER)
print("Settings:")
print()
print("| setting | arrival rate jobs/h | submitted over | demand |")
print("|---|---|---|---|")
for server in ("h100x8", "a100x8"):
    for servers in (256, 2048):
        for load in ("0.8", "1.0", "1.2"):
            name = f"{server}-{servers}-load{load}"
            path = out / f"{name}.load.txt"
            if not path.exists():
                continue
            first, second = path.read_text().splitlines()[:2]
            span = first.split(" submitted over ")[1].split(" (")[0]
            demand = second.split("busy on average")[0].split("they keep ")[1]
            rate = RATES[(servers, load)]
            gpu = "H100-80GB" if server == "h100x8" else "A100-40GB"
            print(f"| {servers}×8 {gpu}, load {load} | {rate} | {span} | {demand} |")
print()
print("| setting | configuration | makespan h | JCT mean min (× a, most free) | JCT p50 | JCT p99 | wait mean min "
      "| OOM crashes | GPU-h lost | requeues | failed |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
summary = []
for server in ("h100x8", "a100x8"):
    for servers in (256, 2048):
        for load in ("0.8", "1.0", "1.2"):
            name = f"{server}-{servers}-load{load}"
            path = out / f"{name}.csv"
            if not path.exists():
                continue
            runs = {r["policy"]: r for r in rows(path)}
            packed = {r["policy"]: r for r in rows(out / f"{name}.best-fit.csv")}
            base = float(runs["exclusive"]["jct_avg_s"])
            base_packed = float(packed["exclusive"]["jct_avg_s"])
            gpu = "H100-80GB" if server == "h100x8" else "A100-40GB"
            setting = f"{servers}×8 {gpu}, load {load}"
            ordered = []
            for policy, label in LABELS.items():
                ordered.append((label, runs[policy]))
                if policy in packed:
                    ordered.append((label + ", best fit", packed[policy]))
            for label, r in ordered:
                jct = float(r["jct_avg_s"])
                print(f"| {setting} | {label} | {hours(r['total_time_s']):.0f} | "
                      f"{minutes(jct):.0f} ({jct / base:.2f}) | {minutes(r['jct_p50_s']):.0f} | "
                      f"{minutes(r['jct_p99_s']):.0f} | {minutes(r['wait_avg_s']):.0f} | "
                      f"{r['oom_crashes']} | {float(r['lost_gpu_hours']):.1f} | {r['requeues']} | "
                      f"{r['failed']} |")
            old = rows(out / f"{name}.per-server.csv")[0]
            print(f"| {setting} | (a) with the former per-server rule | "
                  f"{hours(old['total_time_s']):.0f} | {minutes(old['jct_avg_s']):.0f} | "
                  f"{minutes(old['jct_p50_s']):.0f} | {minutes(old['jct_p99_s']):.0f} | "
                  f"{minutes(old['wait_avg_s']):.0f} | {old['oom_crashes']} | "
                  f"{float(old['lost_gpu_hours']):.1f} | {old['requeues']} | {old['failed']} |")
            c = runs["worst-fit:est=noisy:0.067:0.046"]
            d = runs["worst-fit:est=oracle"]
            ratio = float(c["jct_avg_s"]) / base
            ratio_packed = float(c["jct_avg_s"]) / base_packed
            oom_ok = int(c["oom_crashes"]) <= int(d["oom_crashes"])
            summary.append((setting, ratio, ratio_packed, c["oom_crashes"], d["oom_crashes"],
                            ratio <= 0.6 and oom_ok, ratio_packed <= 0.6 and oom_ok))

print()
print("| setting | JCT (c) / (a) most free | JCT (c) / (a) best fit | OOM (c) | OOM (d) "
      "| target met against (a) most free | against (a) best fit |")
print("|---|---|---|---|---|---|---|")
for setting, ratio, ratio_packed, oom_c, oom_d, met, met_packed in summary:
    print(f"| {setting} | {ratio:.2f} | {ratio_packed:.2f} | {oom_c} | {oom_d} | "
          f"{'yes' if met else 'no'} | {'yes' if met_packed else 'no'} |")

print()
print("Simulator speed in these runs (jobs/s of wall time, from --timings; the machine was shared):")
print()
print("| setting | " + " | ".join(["exclusive", "shards:2", "shards:4", "colo est.", "oracle",
                                      "exclusive bf", "shards:2 bf", "shards:4 bf"]) + " |")
print("|---|" + "---|" * 8)
for server in ("h100x8", "a100x8"):
    for servers in (256, 2048):
        for load in ("0.8", "1.0", "1.2"):
            name = f"{server}-{servers}-load{load}"
            path = out / f"{name}.timings.txt"
            if not path.exists():
                continue
            speeds = [line.split(" = ")[1].split(" jobs/s")[0] for line in path.read_text().splitlines()
                      if " jobs/s" in line]
            gpu = "H100-80GB" if server == "h100x8" else "A100-40GB"
            print(f"| {servers}×8 {gpu}, load {load} | " + " | ".join(speeds) + " |")
