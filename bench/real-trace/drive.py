#!/usr/bin/env python3
"""Plays a trace against a running colod: submits each job at its arrival time with the options of
one benchmark mode, waits until every job has ended, and writes what happened (per-job times and
attempts from `colo show`, NVML energy and mean GPM SM activity over the run).

    drive.py --trace trace.json --mode worst-fit --profiles DIR --out result.json [--colo colo]

Modes (the policy itself is colod's configuration; run.sh starts colod for each):
    exclusive           --share exclusive, no memory number
    round-robin         --share plain, no memory number
    round-robin-mps     --share mps, no memory number
    worst-fit           --share mps, --estimate-from the workload's colo-profile summary
    least-utilized      --share mps, --estimate-from
    consolidate         --share mps, --estimate-from (the thesis' MUG: busiest GPUs first)
    worst-fit-recovery  --share mps, no memory number (the thesis' MAGM learning from crashes)
    worst-fit-oracle    --share mps, --mem the workload's measured solo peak (the thesis' oracle):
                        --solo's, or with --peaks-from the most each workload held per GPU in
                        an earlier mode's result on this machine (its exclusive run)

--ballast names ballast.py's report when one held GPU memory through the run (recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SHARE = {"exclusive": "exclusive", "round-robin": "plain", "round-robin-mps": "mps",
         "worst-fit": "mps", "least-utilized": "mps", "consolidate": "mps",
         "worst-fit-recovery": "mps", "worst-fit-oracle": "mps"}
ESTIMATE = {"worst-fit", "least-utilized", "consolidate"}


def colo(args, *rest):
    out = subprocess.run([args.colo, *rest], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"colo {' '.join(rest)}: {out.stderr.strip()}")
    return out.stdout


def oracle_peaks(result_path):
    """The most each workload held on one GPU in a mode's successful attempts."""
    peaks = {}
    for record in json.load(open(result_path))["records"]:
        for attempt in record["attempts"]:
            if attempt["exit"] == "success" and attempt["peak"]:
                peaks[record["workload"]] = max(peaks.get(record["workload"], 0), attempt["peak"])
    return peaks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--mode", required=True, choices=sorted(SHARE))
    parser.add_argument("--profiles", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--colo", default="colo")
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--solo", default=os.path.join(HERE, "results-h200-2026-11-21", "solo.json"),
                        help="the solo profiles whose peaks the oracle declares")
    parser.add_argument("--peaks-from", help="an earlier mode's result on this machine (its "
                        "exclusive run): the oracle declares each workload's peak measured there")
    parser.add_argument("--ballast", help="ballast.py's report, if one held memory")
    parser.add_argument("--gpu-model", default="H200", help="the GPUs' model, for colo's estimator")
    args = parser.parse_args()
    peaks = {}
    if args.mode == "worst-fit-oracle":
        peaks = oracle_peaks(args.peaks_from) if args.peaks_from else \
            {w["name"]: w["peak_nvml_bytes"] for w in json.load(open(args.solo))["workloads"]}
    ballast = json.load(open(args.ballast)) if args.ballast else None
    from profile_solo import Sampler

    jobs = json.load(open(args.trace))["jobs"]
    sampler = Sampler(interval=1.0, indices="all")
    energy_start = sampler.total_energy_mj()
    sampler.start()
    job_log = os.path.splitext(args.out)[0] + "-jobs.jsonl"  # each job's own report
    if os.path.exists(job_log):
        os.remove(job_log)
    t0 = time.time()
    ids = {}
    for job in jobs:
        delay = t0 + job["arrival_s"] - time.time()
        if delay > 0:
            time.sleep(delay)
        gpus = job.get("gpus", 1)
        cmd = ["submit", "--json", "--name", f"j{job['id']}-{job['workload']}", "--share",
               SHARE[args.mode], "--gpus", str(gpus)]
        if SHARE[args.mode] == "mps" and "smact" in job:
            cmd += ["--smact", str(job["smact"])]  # its solo SM activity sets its MPS thread share
        if args.mode == "worst-fit-oracle":
            cmd += ["--mem", f"{-(-peaks[job['workload']] // 2**20)}MiB"]
        if args.mode in ESTIMATE:
            cmd += ["--estimate-from", os.path.join(args.profiles, job["workload"] + ".json"),
                    "--gpu-model", args.gpu_model]
        cmd += ["--", sys.executable, os.path.join(HERE, "job.py"), job["workload"], "--iters",
                str(job["iters"]), "--gpus", str(gpus), "--log", job_log]
        ids[job["id"]] = json.loads(colo(args, *cmd))["job"]
    while time.time() - t0 < args.timeout:
        if not json.loads(colo(args, "queue", "--json"))["jobs"]:
            break
        time.sleep(0.5)
    ended = time.time()
    sampler.stop.set()
    energy_j = (sampler.total_energy_mj() - energy_start) / 1000

    records = []
    for job in jobs:
        shown = json.loads(colo(args, "show", str(ids[job["id"]]), "--json"))["job"]
        attempts = shown.get("attempt_list", [])
        records.append({
            "trace_id": job["id"], "job": ids[job["id"]], "workload": job["workload"],
            "class": job["class"], "solo_s": job["solo_s"], "gpus": job.get("gpus", 1),
            "state": shown.get("state"),
            "submitted": shown.get("submitted"), "finished": shown.get("finished"),
            "first_start": attempts[0]["started"] if attempts else None,
            "last_start": attempts[-1]["started"] if attempts else None,
            "attempts": [{"exit": a.get("exit_kind"), "detail": a.get("detail"),
                          "gpus": a.get("gpus"), "started": a.get("started"),
                          "ended": a.get("ended"), "mode": a.get("mode"),
                          "threads": a.get("thread_percent"), "limit": a.get("memory_limit"),
                          "peak": a.get("peak")} for a in attempts],
            "estimate": shown.get("estimate"),
        })
    done = [r for r in records if r["finished"]]
    first_submit = min(r["submitted"] for r in records)
    oom = sum(1 for r in records for a in r["attempts"] if a["exit"] == "out-of-memory")
    lost_gpu_s = sum(((a["ended"] or 0) - (a["started"] or 0)) * r["gpus"] for r in records
                     for a in r["attempts"] if a["exit"] not in ("success", None, ""))
    reports = []
    if os.path.exists(job_log):
        with open(job_log) as f:
            reports = [json.loads(line) for line in f if line.strip()]
    smact = [s["smact"] for s in sampler.samples]
    result = {
        "mode": args.mode, "jobs": len(records), "succeeded": sum(r["state"] == "succeeded" for r in records),
        "total_s": max(r["finished"] for r in done) - first_submit if done else None,
        "avg_jct_s": sum(r["finished"] - r["submitted"] for r in done) / len(done) if done else None,
        "avg_wait_s": sum(r["first_start"] - r["submitted"] for r in done) / len(done) if done else None,
        "avg_exec_s": sum(r["finished"] - r["last_start"] for r in done) / len(done) if done else None,
        "oom_crashes": oom, "lost_gpu_seconds": lost_gpu_s, "energy_j": energy_j,
        "mean_smact": sum(smact) / len(smact) if smact else None,
        "gpus": len(sampler.handles), "wall_s": ended - t0, "ballast": ballast, "records": records,
        "job_reports": reports,
        "timeline": sampler.samples,
    }
    json.dump(result, open(args.out, "w"), indent=1)
    print(f"{args.mode:<20} total {result['total_s']:.0f} s  JCT {result['avg_jct_s']:.0f} s  "
          f"wait {result['avg_wait_s']:.0f} s  exec {result['avg_exec_s']:.0f} s  OOM {oom}  "
          f"energy {energy_j / 1000:.1f} kJ  SMACT {result['mean_smact']:.2f}  "
          f"{result['succeeded']}/{len(records)} succeeded", flush=True)


if __name__ == "__main__":
    main()
