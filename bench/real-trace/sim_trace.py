#!/usr/bin/env python3
"""Writes a real-trace benchmark trace as a `colo sim` CSV (docs/formats.md) before it runs, to size
it, with the solo profiles of profile_solo.py as its catalogue (sim_compare.py does the same after a
run, from the run's exclusive mode): a job's solo duration is its iterations at the workload's
solo iteration time plus the workload's start-up (interpreter, imports, model build, warm-up steps
and exit), its peak and SMACT the solo run's, `declared_mem` the memory colo's estimator plans with.

    sim_trace.py TRACE.json SOLO.json [--startup RESULT-exclusive.json | --startup-s 8] -o trace.csv

--startup takes each workload's start-up from a measured exclusive run (a job's execution time
there minus its iterations at the solo iteration time: every job of that run has its GPU alone).
"""

import argparse
import json
import statistics


def startup_by_workload(result_path, solo):
    """Median (execution − iterations × solo iteration time) per workload and GPU count."""
    iter_ms = {w["name"]: w["median_iter_ms"] for w in solo}
    found = {}
    with open(result_path) as f:
        result = json.load(f)
    reports = {str(r.get("job")): r for r in result.get("job_reports", [])}
    for r in result["records"]:
        if r["state"] != "succeeded":
            continue
        report = reports.get(str(r["job"]))
        iters = report["iters"] + 5 if report else None  # 5 warm-up steps are not in "iters"
        if iters is None:
            continue
        work = iters * iter_ms[r["workload"]] / 1000
        if r.get("gpus", 1) > 1:
            work = iters * report["median_iter_ms"] / 1000
        found.setdefault((r["workload"], r.get("gpus", 1)), []).append(
            r["finished"] - r["last_start"] - work)
    return {k: statistics.median(v) for k, v in found.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("solo")
    parser.add_argument("--startup", help="a measured exclusive run's result JSON")
    parser.add_argument("--startup-s", type=float, default=8)
    parser.add_argument("--profiles", help="colo estimates per workload (JSON name -> bytes)")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    with open(args.trace) as f:
        jobs = json.load(f)["jobs"]
    with open(args.solo) as f:
        solo = json.load(f)["workloads"]
    by_name = {w["name"]: w for w in solo}
    startup = startup_by_workload(args.startup, solo) if args.startup else {}
    planned = {}
    if args.profiles:
        with open(args.profiles) as f:
            planned = json.load(f)
    with open(args.output, "w") as out:
        out.write("submit_s,name,duration_s,peak_mem,smact,gpus,warmup_s,startup_s,declared_mem\n")
        for j in jobs:
            w = by_name[j["workload"]]
            gpus = j.get("gpus", 1)
            extra = startup.get((j["workload"], gpus), startup.get((j["workload"], 1), args.startup_s))
            duration = j["solo_s"] + 5 * w["median_iter_ms"] / 1000 + extra
            peak_mib = round(w["peak_nvml_bytes"] / 2**20)
            declared = round(planned[j["workload"]] / 2**20) if j["workload"] in planned else ""
            out.write(f"{j['arrival_s']},j{j['id']}-{j['workload']},{duration:.2f},{peak_mib},"
                      f"{w['smact']:.3f},{gpus},{min(extra, duration / 2):.2f},{extra:.2f},"
                      f"{declared}\n")


if __name__ == "__main__":
    main()
