#!/usr/bin/env python3
"""Fits `colo sim`'s MPS interference model to the real-trace runs' jobs, each job's slowdown
against its co-runners, with the placements as measured (no scheduling in the loop).

    mps_fit.py [--check-only]

For every job of an MPS mode: its measured slowdown is its mean iteration time over the same
workload's in that run's exclusive mode; its co-runners at each moment are the jobs training on
its GPU(s) then (start-up excluded, as job.py reports it), with their solo SMACT from the exclusive
mode. The model's slowdown, integrated over the job's training time (a 2-GPU job at its slower
GPU's pace), is compared with the measured one in log ratio. The constants are fitted on the 1- and
2-GPU H200 runs and the H100 collocation table (shared/data/h100-colocation-2026-11-21) and checked
on the 4-GPU run, which was not used to fit them. The model is src/sim/interference.cc's; this file
repeats its formula so that the grid can vary the constants.
"""

import argparse
import itertools
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sim_compare import catalogue_from_exclusive, load  # noqa: E402

FIT_RUNS = {  # results folder: MPS modes
    "results-h200x2-2026-11-21": ["worst-fit", "least-utilized", "worst-fit-recovery"],
    "results-h200-memory-2026-11-22": ["worst-fit", "worst-fit-oracle", "worst-fit-recovery"],
    "results-h200-long-2026-11-23": ["worst-fit"],
}
CHECK_RUNS = {
    "results-h200x4-2026-11-27": ["round-robin-mps", "worst-fit", "least-utilized", "consolidate",
                                  "worst-fit-recovery"],
}
# The H100 table (identical jobs): jobs, solo SMACT, MPS thread percent, measured slowdown.
H100 = [(2, 0.206, 100, 5.3 / 5.1), (4, 0.206, 100, 5.7 / 5.1), (2, 0.206, 50, 5.35 / 5.1),
        (2, 0.209, 100, 11.85 / 11.8), (2, 0.804, 100, 66.1 / 37.9)]


def slowdowns(jobs, beta, queueing, queue_cap, capacity):
    """src/sim/interference.cc's MPS model; jobs: [(smact, thread percent)]."""
    def limit(d, threads):
        return max(1.0, d / (threads / 100 * capacity)) if threads < 100 else 1.0
    if len(jobs) <= 1:
        return [limit(d, t) for d, t in jobs]
    total = sum(d for d, _ in jobs)
    out = []
    for d, t in jobs:
        others = total - d
        busy = min(others, queue_cap)
        wait = queueing * busy / (1 - busy) * max(0.0, 1 - d)
        out.append(max(1.0, 1 + beta * others + wait, limit(d, t)))
    delivered = sum(d / s for (d, _), s in zip(jobs, out))
    return [s * delivered / capacity for s in out] if delivered > capacity else out


def former(jobs, beta=0.19, capacity=0.923):
    """The model before: every job on a saturated GPU slowed alike."""
    if len(jobs) <= 1:
        return [max(1.0, d / (t / 100 * capacity)) if t < 100 else 1.0 for d, t in jobs]
    total = sum(d for d, _ in jobs)
    return [max(1.0, 1 + beta * (total - d), total / capacity,
                d / (t / 100 * capacity) if t < 100 else 1.0) for d, t in jobs]


def jobs_of(folder, mode):
    exclusive = load(os.path.join(HERE, folder, "result-exclusive.json"))
    catalogue = catalogue_from_exclusive(exclusive)
    run = load(os.path.join(HERE, folder, f"result-{mode}.json"))
    reports = {(str(r["job"]), str(r["attempt"])): r for r in run["job_reports"]}
    jobs = []
    for rec in run["records"]:
        solo = catalogue.get(f"{rec['workload']}/{rec['gpus']}")
        for n, attempt in enumerate(rec["attempts"], 1):
            report = reports.get((str(rec["job"]), str(n)))
            if solo is None:
                continue
            job = {"workload": rec["workload"], "gpus": attempt["gpus"], "smact": solo["smact"],
                   "threads": attempt.get("threads") or 100}
            if report:  # training: from the first step to the end of the last
                job["from"] = attempt["started"] + report["startup_s"]
                job["to"] = job["from"] + report["wall_s"]
                job["slowdown"] = report["mean_iter_ms"] / 1000 / solo["iter_s"]
            else:  # a crashed attempt: on the GPU from its start-up to its end
                job["from"] = attempt["started"] + solo["startup_s"]
                job["to"] = attempt["ended"]
            jobs.append(job)
    return jobs


def samples(runs):
    """Per measured job: its slowdown and the co-runners of each span of its training time."""
    out = []
    for folder, modes in runs.items():
        for mode in modes:
            jobs = jobs_of(folder, mode)
            for job in jobs:
                if "slowdown" not in job:
                    continue
                cuts = sorted({job["from"], job["to"]} | {t for o in jobs for t in (o["from"], o["to"])
                                                          if job["from"] < t < job["to"]})
                spans = []
                for a, b in zip(cuts, cuts[1:]):
                    mid = (a + b) / 2
                    spans.append((b - a, [[(o["smact"], o["threads"]) for o in jobs
                                           if o is not job and g in o["gpus"]
                                           and o["from"] <= mid < o["to"]] for g in job["gpus"]]))
                out.append({"run": f"{folder}:{mode}", "workload": job["workload"],
                            "own": (job["smact"], job["threads"]), "measured": job["slowdown"],
                            "spans": spans})
    return out


def predicted(model, sample):
    work = sum(dt / max(model([sample["own"]] + others)[0] for others in per_gpu)
               for dt, per_gpu in sample["spans"])
    return sum(dt for dt, _ in sample["spans"]) / work


def log_error(model, data):
    errors = [math.log(predicted(model, s) / s["measured"]) for s in data]
    return (sum(e * e for e in errors) / len(errors)) ** 0.5, sum(errors) / len(errors)


def h100_error(model):
    return max(abs(model([(d, t)] * n)[0] / m - 1) for n, d, t, m in H100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check-only", action="store_true", help="no grid: the simulator's constants")
    parser.add_argument("--jobs", action="store_true", help="print every checked job")
    args = parser.parse_args()
    fit, check = samples(FIT_RUNS), samples(CHECK_RUNS)
    print(f"fit: {len(fit)} jobs of {', '.join(FIT_RUNS)} and the H100 table; "
          f"check: {len(check)} jobs of {', '.join(CHECK_RUNS)}")
    chosen = (0.10, 0.04, 0.95, 0.923)  # src/sim/interference.h
    if not args.check_only:
        grid = []
        for constants in itertools.product((0.05, 0.08, 0.1, 0.12, 0.15, 0.19),
                                           (0.02, 0.03, 0.04, 0.05, 0.06, 0.08),
                                           (0.9, 0.95), (0.9, 0.923, 0.95, 1.0)):
            model = lambda jobs, c=constants: slowdowns(jobs, *c)  # noqa: E731
            rms, _ = log_error(model, fit)
            grid.append((rms + 0.5 * h100_error(model), rms, constants))
        grid.sort()
        print("best on the fit set (rms log error + half the worst H100 row's error):")
        for score, rms, c in grid[:5]:
            print(f"  beta {c[0]}, queueing {c[1]}, queue cap {c[2]}, capacity {c[3]}: "
                  f"rms {rms:.3f}, score {score:.3f}")
    print("| model | fit: rms log error (bias) | check: rms log error (bias) | worst H100 row |")
    print("|---|---|---|---|")
    for name, model in (("before (all alike when saturated)", former),
                        ("queueing (the simulator's constants)",
                         lambda jobs: slowdowns(jobs, *chosen))):
        f, c = log_error(model, fit), log_error(model, check)
        print(f"| {name} | {f[0]:.3f} ({f[1]:+.3f}) | {c[0]:.3f} ({c[1]:+.3f}) | "
              f"{100 * h100_error(model):.1f}% |")
    if args.jobs:
        for s in check:
            print(f"{s['run']:45s} {s['workload']:24s} SMACT {s['own'][0]:.2f}: measured "
                  f"{s['measured']:.2f}, before {predicted(former, s):.2f}, now "
                  f"{predicted(lambda jobs: slowdowns(jobs, *chosen), s):.2f}")


if __name__ == "__main__":
    main()
