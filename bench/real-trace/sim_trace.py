#!/usr/bin/env python3
"""Writes a real-trace benchmark trace as a `colo sim` CSV (docs/formats.md) before it runs, to size
it, with the solo profiles of profile_solo.py as its catalogue (sim_compare.py does the same after a
run, from the run's exclusive mode): a job's solo duration is its iterations at the workload's
solo iteration time plus the workload's start-up (interpreter, imports, model build, warm-up steps
and exit), its peak and SMACT the solo run's, `declared_mem` the memory colo's estimator plans with.

    sim_trace.py TRACE.json SOLO.json [--startup-s 8] [--profiles planned.json] -o trace.csv
"""

import argparse
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("solo")
    parser.add_argument("--startup-s", type=float, default=8)
    parser.add_argument("--profiles", help="colo estimates per workload (JSON name -> bytes)")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    with open(args.trace) as f:
        jobs = json.load(f)["jobs"]
    with open(args.solo) as f:
        solo = json.load(f)["workloads"]
    by_name = {w["name"]: w for w in solo}
    planned = {}
    if args.profiles:
        with open(args.profiles) as f:
            planned = json.load(f)
    with open(args.output, "w") as out:
        out.write("submit_s,name,duration_s,peak_mem,smact,gpus,warmup_s,startup_s,declared_mem\n")
        for j in jobs:
            w = by_name[j["workload"]]
            gpus = j.get("gpus", 1)
            extra = args.startup_s
            duration = j["solo_s"] + 5 * w["median_iter_ms"] / 1000 + extra
            peak_mib = round(w["peak_nvml_bytes"] / 2**20)
            declared = round(planned[j["workload"]] / 2**20) if j["workload"] in planned else ""
            out.write(f"{j['arrival_s']},j{j['id']}-{j['workload']},{duration:.2f},{peak_mib},"
                      f"{w['smact']:.3f},{gpus},{min(extra, duration / 2):.2f},{extra:.2f},"
                      f"{declared}\n")


if __name__ == "__main__":
    main()
