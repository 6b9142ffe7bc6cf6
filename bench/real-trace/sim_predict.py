#!/usr/bin/env python3
"""Predicts a real-trace benchmark trace in `colo sim` before (or instead of) running it, with a
measured machine's catalogue (sim_compare.py's catalogue.json: iteration time, start-up, SMACT and
peak per workload, and the power curve fitted to that machine), on any number of such GPUs.

    sim_predict.py TRACE.json --catalogue RESULTS/sim/catalogue.json [--server h200x4]
                   [--modes exclusive,round-robin,worst-fit,least-utilized,worst-fit-recovery]
                   [--estimator noisy:0.04 | --plan-from PROFILES --gpu-model H200]
                   [--queue backfill|fifo] [--grace 10] [--gpu-free 38GiB] [--out DIR]

The modes are sim_compare.py's (the benchmark's modes mapped onto policy, sharing and estimator);
worst-fit, least-utilized and consolidate plan with --estimator (the default: colo's estimate
error, 4%, around the catalogue's peak) or, with --plan-from, with what colod plans a job submitted
--estimate-from its workload's colo-profile summary with: the upper bound of colo's estimator for
that GPU (`colo estimate`, the same code); and they re-plan queued jobs from finished runs of the
same model (`learn=on`), as colod does. --queue: how colod takes its queue (sim_compare.py's
QUEUES; default backfill, colod's since 2026-11-27); --gpu-free
leaves only that much of every GPU to the jobs (smaller GPUs' memory, the rest held). Prints a
Markdown table with each mode's ratios to exclusive; --out keeps the trace CSV and every mode's JSON.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_compare import LEARNING, MODES, QUEUES, write_csv  # noqa: E402

LABEL = {"exclusive": "exclusive", "round-robin": "round-robin, plain sharing",
         "worst-fit": "worst-fit (MAGM), MPS, estimator",
         "least-utilized": "least-utilized (LUG), MPS, estimator",
         "round-robin-mps": "round-robin, MPS",
         "consolidate": "consolidate (MUG), MPS, estimator",
         "worst-fit-recovery": "worst-fit, MPS, recovery only",
         "worst-fit-oracle": "worst-fit, MPS, oracle"}


def estimator_plan(workloads, profiles, gpu_model, colo):
    """What colod plans each workload with when its jobs are submitted --estimate-from the
    workload's colo-profile summary (drive.py): the upper bound of the estimate `colo estimate`
    finds best for that GPU, in bytes per GPU."""
    planned = {}
    for workload in sorted(workloads):
        answer = subprocess.run([colo, "estimate", os.path.join(profiles, workload + ".json"),
                                 "--gpu", gpu_model, "--json"],
                                capture_output=True, text=True, check=True)
        report = json.loads(answer.stdout)
        best = next(e for e in report["estimates"] if e["estimator"] == report["best"])
        planned[workload] = best["upper"]
    return planned


def predict(trace, catalogue, server, modes, estimator, grace, out_dir, colo, gpu_free=None,
            idle_watts=None, planned=None, queue="backfill"):
    cat = dict(catalogue)
    power_fit = cat.pop("power_fit")
    os.makedirs(out_dir, exist_ok=True)
    csv = os.path.join(out_dir, "trace.csv")
    write_csv(csv, trace["jobs"], cat, planned or {})
    # No fit for this card: the simulator's own power model of it.
    power = []
    if power_fit:
        coef = list(power_fit["above_idle_watts"])
        if idle_watts:
            # A GPU held awake (a ballast's context) idles higher, but computes at the power it
            # did: the fit's curve keeps its watts and only its floor rises.
            coef[0] += power_fit["idle_watts"] - idle_watts
        power = ["--power", ",".join(f"{c:.2f}" for c in coef)]
    held = ["--gpu-free", gpu_free] if gpu_free else []
    held += ["--idle-watts", str(idle_watts)] if idle_watts else []
    runs = {}
    for mode in modes:
        policy, sharing, est = MODES[mode]
        if est == "declared" and not planned:
            est = estimator
        if mode in LEARNING:
            policy += ":learn=on"
        sim = subprocess.run([colo, "sim", "--trace", csv, "--server", server, "--policy", policy,
                              "--sharing", sharing, "--estimator", est, "--grace", str(grace),
                              "--json", "--with-jobs", *QUEUES[queue], *power, *held],
                             capture_output=True, text=True, check=True)
        runs[mode] = json.loads(sim.stdout)["runs"][0]
        with open(os.path.join(out_dir, f"{mode}.json"), "w") as f:
            json.dump(runs[mode], f, indent=1)
    return runs


def table(runs):
    base = runs.get("exclusive")
    lines = ["| mode | total time | avg JCT | energy | mean SMACT | OOM crashes |",
             "|---|---|---|---|---|---|"]
    for mode, r in runs.items():
        cells = []
        for value, unit, key in ((r["total_time_s"], "s", "total_time_s"),
                                 (r["jct_s"]["avg"], "s", None), (r["energy_mj"] * 1000, "kJ", None)):
            ref = None
            if base is not None and mode != "exclusive":
                ref = {"s": base["total_time_s"] if key else base["jct_s"]["avg"],
                       "kJ": base["energy_mj"] * 1000}[unit]
            cells.append(f"{value:.0f} {unit}" + (f" ({value / ref:.2f}×)" if ref else ""))
        cells += [f"{r['mean_smact']:.2f}", str(r["oom_crashes"])]
        lines.append(f"| {LABEL[mode]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--catalogue", required=True)
    parser.add_argument("--server", default="h200x2")
    parser.add_argument("--modes", default="exclusive,round-robin,worst-fit,least-utilized,"
                                           "worst-fit-recovery")
    parser.add_argument("--estimator", default="noisy:0.04",
                        help="what worst-fit and least-utilized plan with")
    parser.add_argument("--plan-from", metavar="PROFILES",
                        help="plan as colod does a job submitted --estimate-from "
                             "PROFILES/WORKLOAD.json: colo estimate's upper bound (needs --gpu-model)")
    parser.add_argument("--gpu-model", help="the GPU whose calibration the estimator uses, e.g. H200")
    parser.add_argument("--queue", choices=sorted(QUEUES), default="backfill",
                        help="how colod takes its queue (sim_compare.py's QUEUES)")
    parser.add_argument("--grace", type=float, default=10, help="colod's launch_grace")
    parser.add_argument("--gpu-free", help="memory left to the jobs on every GPU, e.g. 38GiB")
    parser.add_argument("--idle-watts", type=float,
                        help="a GPU's power while no job computes (one holding a ballast's memory "
                             "idles higher); the catalogue's power curve keeps its watts above it")
    parser.add_argument("--colo", default="build/bin/colo")
    parser.add_argument("--out", help="keep the trace CSV and each mode's JSON here")
    args = parser.parse_args()
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(MODES)}")
    with open(args.trace) as f:
        trace = json.load(f)
    with open(args.catalogue) as f:
        catalogue = json.load(f)
    missing = sorted({f"{j['workload']}/{j.get('gpus', 1)}" for j in trace["jobs"]} - set(catalogue))
    if missing:
        sys.exit(f"sim_predict.py: the catalogue has no {', '.join(missing)}")
    planned = None
    if args.plan_from:
        if not args.gpu_model:
            parser.error("--plan-from needs --gpu-model (the estimator's calibration)")
        planned = estimator_plan({j["workload"] for j in trace["jobs"]}, args.plan_from,
                                 args.gpu_model, args.colo)
    out_dir = args.out or tempfile.mkdtemp(prefix="sim-predict-")
    runs = predict(trace, catalogue, args.server, modes, args.estimator, args.grace, out_dir,
                   args.colo, args.gpu_free, args.idle_watts, planned, args.queue)
    print(table(runs))


if __name__ == "__main__":
    main()
