#!/usr/bin/env python3
"""Replays a measured real-trace run in `colo sim` and compares the prediction with what was measured,
mode by mode (total trace time, average JCT, energy, mean SMACT).

    sim_compare.py RESULTS_DIR [--colo build/bin/colo] [--server h200x2] [--grace 10]
                   [--exclusive OTHER/result-exclusive.json]

The simulator's catalogue is this machine's solo profiles, taken from the exclusive run (each of its
jobs had its GPU(s) alone): per workload and GPU count, the median iteration time, the median time
outside the training steps (start-up: interpreter, imports, model build; and exit), and the mean SM
activity over the jobs' steady phases. Job i of the trace then lasts that overhead + (iterations + 5
warm-up) × iteration time, the overhead as its CPU-only start-up phase (`startup_s`). The power model
is fitted to the same run: GPU power above idle against SM activity, least squares, while one job
computes (`colo sim --power`). Writes RESULTS_DIR/sim/{catalogue.json, trace.csv, MODE.json,
comparison.json}.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

# How each benchmark mode maps onto the simulator: policy, sharing, estimator.
MODES = {
    "exclusive": ("exclusive", "mps", "none"),
    "round-robin": ("round-robin", "plain", "none"),
    "round-robin-mps": ("round-robin", "mps", "none"),
    "worst-fit": ("worst-fit", "mps", "declared"),
    "least-utilized": ("least-utilized", "mps", "declared"),
    "consolidate": ("consolidate", "mps", "declared"),
    "worst-fit-recovery": ("worst-fit", "mps", "none"),
    "worst-fit-oracle": ("worst-fit", "mps", "oracle"),
}
# How colod's queue took the jobs of its server (src/daemon/config.cc, DaemonSchedulerDefaults):
#   backfill  colod since 2026-11-27 (the 4x H200 memory run, results-h200x4-2026-11-27b, on): its
#             server's own queue in fair-share order (one user's jobs: in submission order), with
#             EASY backfill past a head that waits, looking at up to 100 later jobs (they start on
#             GPUs the head's reservation does not hold, or on those if they end before its time)
#   fifo      colod before, and the thesis: the head that waits holds back every job behind it
# colo sim's own default, the cluster queue, is the fifo one on a single server.
QUEUES = {"backfill": ["--cluster", "per-server", "--backfill", "--backfill-depth", "100",
                       "--order", "fair-share"],
          "fifo": ["--cluster", "per-server"]}
# Modes whose jobs colod re-planned from earlier runs of the same model while they were queued.
LEARNING = {"worst-fit", "least-utilized", "consolidate"}
WARMUP_STEPS = 5  # job.py's untimed first steps


def load(path):
    with open(path) as f:
        return json.load(f)


def steady_smact(result, record):
    """Mean SM activity of the job's GPU(s) from its first step to its end (exclusive run)."""
    attempt = record["attempts"][-1]
    report = record.get("report")
    begin = attempt["started"] + (report["startup_s"] if report else 0)
    values = [s["gpus"][g]["smact"] for s in result["timeline"] if begin <= s["t"] <= attempt["ended"]
              for g in attempt["gpus"]]
    return statistics.mean(values) if values else None


def catalogue_from_exclusive(result):
    reports = {str(r["job"]): r for r in result["job_reports"]}
    groups = {}
    for rec in result["records"]:
        if rec["state"] != "succeeded" or str(rec["job"]) not in reports:
            continue
        rec = dict(rec, report=reports[str(rec["job"])])
        groups.setdefault(f"{rec['workload']}/{rec['gpus']}", []).append(rec)
    catalogue = {}
    for key, recs in sorted(groups.items()):
        iter_s = statistics.median(r["report"]["mean_iter_ms"] / 1000 for r in recs)
        # Everything but the training steps: start-up, the warm-up steps' extra, exit.
        overhead = statistics.median(
            (r["finished"] - r["last_start"]) - (r["report"]["iters"] + WARMUP_STEPS) * iter_s
            for r in recs)
        smact = [s for s in (steady_smact(result, r) for r in recs) if s is not None]
        catalogue[key] = {"jobs": len(recs), "iter_s": iter_s, "overhead_s": overhead,
                          "startup_s": statistics.median(r["report"]["startup_s"] for r in recs),
                          "smact": statistics.mean(smact) if smact else 0.2,
                          "peak_bytes": max(r["attempts"][-1]["peak"] or 0 for r in recs)}
    return catalogue


def job_gpu_samples(result, phase):
    """The (SM activity, power) of each GPU of each exclusive-run job at every sample inside
    `phase(attempt, startup_s)`, a (from, to) span of time."""
    reports = {str(r["job"]): r for r in result["job_reports"]}
    for rec in result["records"]:
        report = reports.get(str(rec["job"]))
        if not report or not rec["attempts"]:
            continue
        a = rec["attempts"][-1]
        begin, end = phase(a, report["startup_s"])
        for s in result["timeline"]:
            if begin <= s["t"] <= end:
                for g in a["gpus"]:
                    yield s["gpus"][g]["smact"], s["gpus"][g]["power_w"]


def power_fit(result, idle_watts):
    """Least-squares A, L, Q of (GPU power − idle) = A + L·s + Q·s² over the samples where one job
    of the exclusive run was past its start-up (s: the GPU's SM activity)."""
    points = [(smact, watts - idle_watts) for smact, watts in job_gpu_samples(
        result, lambda a, startup: (a["started"] + startup + 2, a["ended"] - 1))]
    # Normal equations of the 3-parameter fit, solved by Gaussian elimination.
    m = [[0.0] * 4 for _ in range(3)]
    for s, p in points:
        basis = (1.0, s, s * s)
        for i in range(3):
            m[i][3] += basis[i] * p
            for j in range(3):
                m[i][j] += basis[i] * basis[j]
    for i in range(3):
        for j in range(i + 1, 3):
            f = m[j][i] / m[i][i]
            m[j] = [x - f * y for x, y in zip(m[j], m[i])]
    coef = [0.0] * 3
    for i in reversed(range(3)):
        coef[i] = (m[i][3] - sum(m[i][k] * coef[k] for k in range(i + 1, 3))) / m[i][i]
    residual = [p - (coef[0] + coef[1] * s + coef[2] * s * s) for s, p in points]
    rms = (sum(r * r for r in residual) / len(residual)) ** 0.5
    return coef, rms, len(points)


def idle_power(result):
    """Mean power of a GPU while no job of the run holds it."""
    values = []
    for s in result["timeline"]:
        for g, gpu in enumerate(s["gpus"]):
            if not any(a["started"] <= s["t"] <= (a["ended"] or 0) and g in a["gpus"]
                       for r in result["records"] for a in r["attempts"]):
                values.append(gpu["power_w"])
    return statistics.mean(values) if values else None


def startup_power(result):
    """Mean power of a GPU while the one job on it (exclusive run) is still starting up: what the
    GPU draws when it holds contexts but computes nothing."""
    values = [watts for _, watts in job_gpu_samples(
        result, lambda a, startup: (a["started"] + 1, a["started"] + startup - 1))]
    return statistics.mean(values) if values else None


def write_csv(path, trace_jobs, catalogue, planned, startup_phase=True):
    with open(path, "w") as out:
        out.write("submit_s,name,model,duration_s,peak_mem,smact,gpus,warmup_s,startup_s,declared_mem\n")
        for j in trace_jobs:
            gpus = j.get("gpus", 1)
            c = catalogue[f"{j['workload']}/{gpus}"]
            duration = c["overhead_s"] + (j["iters"] + WARMUP_STEPS) * c["iter_s"]
            declared = round(planned[j["workload"]] / 2**20) if j["workload"] in planned else ""
            out.write(f"{j['arrival_s']},j{j['id']}-{j['workload']},{j['workload']},{duration:.2f},"
                      f"{round(c['peak_bytes'] / 2**20)},{c['smact']:.3f},{gpus},"
                      f"{min(c['overhead_s'], duration / 2):.2f},"
                      f"{c['overhead_s'] if startup_phase else 0:.2f},{declared}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results")
    parser.add_argument("--colo", default="build/bin/colo")
    parser.add_argument("--server", default="h200x2")
    parser.add_argument("--trace", default=os.path.join(os.path.dirname(__file__), "trace-h200x2.json"))
    parser.add_argument("--grace", type=float, default=10, help="colod's launch_grace in the run")
    parser.add_argument("--idle-watts", type=float, default=78,
                        help="the server profile's idle power (h200: 78 W)")
    parser.add_argument("--h100-power", action="store_true",
                        help="keep the simulator's H100 power fit instead of fitting this GPU's")
    parser.add_argument("--no-startup-phase", action="store_true",
                        help="model the whole run as computing (the simulator before start-up phases)")
    parser.add_argument("--name", default="sim", help="output folder under RESULTS_DIR")
    parser.add_argument("--predicted", help="compare with the predictions in this folder "
                                            "(sim_predict.py --out, made before the run) instead")
    parser.add_argument("--before", help="with --predicted: put these predictions (the ones made "
                                         "before the run, left as they are) beside them")
    parser.add_argument("--exclusive", help="the exclusive run to take the catalogue from "
                                            "(default: RESULTS_DIR's)")
    parser.add_argument("--startup-idle", action="store_true",
                        help="take the GPU's idle power from the exclusive run's start-up phases "
                             "(where something else keeps the GPU out of its low-power state)")
    parser.add_argument("--queue", choices=sorted(QUEUES), default="backfill",
                        help="how the run's colod took its queue: backfill (colod since 2026-11-27) "
                             "or fifo (before; the comparisons made before 2026-11-28 simulated it)")
    parser.add_argument("--learn", action="store_true",
                        help="colod re-planned queued jobs from earlier runs of their model "
                             "(colod after 2026-11-22): simulate worst-fit and least-utilized "
                             "with learn=on")
    args = parser.parse_args()
    measured = {m: load(os.path.join(args.results, f"result-{m}.json")) for m in MODES
                if os.path.exists(os.path.join(args.results, f"result-{m}.json"))}
    if args.predicted:  # predictions made before the run (sim_predict.py --out): compared only
        rows = predicted_rows(measured, args.predicted)
        json.dump(rows, open(os.path.join(args.predicted, "comparison.json"), "w"), indent=1)
        if args.before:
            print_beside(predicted_rows(measured, args.before), rows)
        else:
            print_rows(rows)
        return
    exclusive = load(args.exclusive) if args.exclusive else measured.get("exclusive")
    if exclusive is None:
        sys.exit("sim_compare.py: the exclusive run is the catalogue; result-exclusive.json is missing")
    out_dir = os.path.join(args.results, args.name)
    os.makedirs(out_dir, exist_ok=True)
    catalogue = catalogue_from_exclusive(exclusive)
    # What colo's estimator planned with for each workload (the upper bound), as the sim's declared.
    planned = {}
    for m in ("worst-fit", "least-utilized", "consolidate"):
        for rec in measured.get(m, {}).get("records", []):
            if rec.get("estimate") and rec["workload"] not in planned:
                planned[rec["workload"]] = rec["estimate"]["upper"]
    idle = []
    if args.startup_idle:
        args.idle_watts = startup_power(exclusive)
        idle = ["--idle-watts", f"{args.idle_watts:.1f}"]
    coef, rms, samples = power_fit(exclusive, args.idle_watts)
    catalogue["power_fit"] = {"above_idle_watts": coef, "rms_watts": rms, "samples": samples,
                              "idle_watts": args.idle_watts,
                              "idle_watts_measured": idle_power(exclusive),
                              "startup_watts_measured": startup_power(exclusive)}
    power = [] if args.h100_power else ["--power", ",".join(f"{c:.2f}" for c in coef)]
    json.dump(catalogue, open(os.path.join(out_dir, "catalogue.json"), "w"), indent=1)
    del catalogue["power_fit"]
    csv = os.path.join(out_dir, "trace.csv")
    write_csv(csv, load(args.trace)["jobs"], catalogue, planned, not args.no_startup_phase)

    # A ballast held all but some memory of every GPU through the run: the simulated GPUs too.
    ballast = exclusive.get("ballast")
    held = ["--gpu-free", f"{ballast['leave_gib']}GiB"] if ballast else []
    queue = QUEUES[args.queue]

    rows = []
    for mode, run in measured.items():
        policy, sharing, estimator = MODES[mode]
        if args.learn and mode in LEARNING:
            policy += ":learn=on"
        sim = subprocess.run([args.colo, "sim", "--trace", csv, "--server", args.server, "--policy",
                              policy, "--sharing", sharing, "--estimator", estimator, "--grace",
                              str(args.grace), "--json", "--with-jobs", *queue, *power, *held, *idle],
                             capture_output=True, text=True, check=True)
        predicted = json.loads(sim.stdout)["runs"][0]
        json.dump(predicted, open(os.path.join(out_dir, f"{mode}.json"), "w"), indent=1)
        rows.append(compare_row(mode, run, predicted))
    json.dump(rows, open(os.path.join(out_dir, "comparison.json"), "w"), indent=1)
    print_rows(rows)


def compare_row(mode, run, predicted):
    return {"mode": mode,
            "measured": {"total_s": run["total_s"], "avg_jct_s": run["avg_jct_s"],
                         "energy_kj": run["energy_j"] / 1000, "mean_smact": run["mean_smact"],
                         "oom_crashes": run["oom_crashes"]},
            "predicted": {"total_s": predicted["total_time_s"], "avg_jct_s": predicted["jct_s"]["avg"],
                          "energy_kj": predicted["energy_mj"] * 1000,
                          "mean_smact": predicted["mean_smact"],
                          "oom_crashes": predicted["oom_crashes"]}}


def predicted_rows(measured, folder):
    return [compare_row(mode, run, load(os.path.join(folder, f"{mode}.json")))
            for mode, run in measured.items() if os.path.exists(os.path.join(folder, f"{mode}.json"))]


METRICS = (("total_s", "total time", "s"), ("avg_jct_s", "avg JCT", "s"),
           ("energy_kj", "energy", "kJ"))


def ranking(rows, kind, key):
    return [r["mode"] for r in sorted(rows, key=lambda r: r[kind][key])]


def print_beside(before, after):
    """Per mode and metric: measured, predicted before (error), predicted now (error); then whether
    each prediction ranks the modes as measured."""
    by_mode = {r["mode"]: r for r in before}
    print("| mode | metric | measured | predicted before | predicted now |")
    print("|---|---|---|---|---|")
    for r in after:
        b = by_mode.get(r["mode"])
        for key, name, unit in METRICS:
            m = r["measured"][key]
            cells = [f"{m:.0f} {unit}"]
            for p in (b, r):
                cells.append("–" if p is None else
                             f"{p['predicted'][key]:.0f} {unit} ({100 * (p['predicted'][key] - m) / m:+.0f}%)")
            print(f"| {r['mode']} | {name} | " + " | ".join(cells) + " |")
        crashes = [str(r["measured"]["oom_crashes"]), "–" if b is None else str(b["predicted"]["oom_crashes"]),
                   str(r["predicted"]["oom_crashes"])]
        print(f"| {r['mode']} | OOM crashes | " + " | ".join(crashes) + " |")
    common = [r["mode"] for r in after if r["mode"] in by_mode]
    for key, name, _ in METRICS:
        measured = ranking([r for r in after if r["mode"] in common], "measured", key)
        print(f"\nby {name}, measured: {' < '.join(measured)}")
        for label, rows in (("before", [r for r in before if r["mode"] in common]),
                            ("now", [r for r in after if r["mode"] in common])):
            order = ranking(rows, "predicted", key)
            print(f"by {name}, predicted {label}: {' < '.join(order)}"
                  f" ({'the same' if order == measured else 'not the same'})")


def print_rows(rows):
    print("| mode | total: measured / predicted | avg JCT | energy | mean SMACT | OOM crashes |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        cells = []
        for key, unit in (("total_s", "s"), ("avg_jct_s", "s"), ("energy_kj", "kJ")):
            m, p = r["measured"][key], r["predicted"][key]
            cells.append(f"{m:.0f} / {p:.0f} {unit} ({100 * (p - m) / m:+.0f}%)")
        cells.append(f"{r['measured']['mean_smact']:.2f} / {r['predicted']['mean_smact']:.2f}")
        cells.append(f"{r['measured']['oom_crashes']} / {r['predicted']['oom_crashes']}")
        print(f"| {r['mode']} | " + " | ".join(cells) + " |")
    for kind in ("measured", "predicted"):
        for key in ("total_s", "avg_jct_s", "energy_kj"):
            order = sorted(rows, key=lambda r: r[kind][key])
            print(f"{kind} ranking by {key}: " + " < ".join(r["mode"] for r in order))


if __name__ == "__main__":
    main()
