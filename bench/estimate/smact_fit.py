#!/usr/bin/env python3
"""Fits colo's solo-SMACT model for one GPU to smact.py's measurements and checks it on the cases
it was not fitted on.

    smact_fit.py --measured A.jsonl[,B.jsonl] --profiles DIR[,DIR] [--fit-sets all]
                 [--calibration FILE.json] [--table OUT.md]

The model (src/estimate/smact_model.h says the same): one step keeps the GPU busy for
    gpu = flops / rate(precision) + (2 x bytes allocated per step + 16 x parameters) / bandwidth
(every allocated byte is written and read at least once; weights, gradients and optimizer state
move once more per step) and the host issues it in host = ops x host_per_op, where ops are the
allocations per step of the profile's trace (nearly every op allocates its output). Eager
frameworks launch ahead, so the two overlap: the step takes max(gpu, host) and the SMs are active
fill x gpu / max(gpu, host) of it. The five numbers are fitted to both the measured SMACT and the
measured step time (log error, a twentieth of the weight), on --fit-sets only; the table reports
every set. With --calibration the fitted numbers are written into that calibration file's "smact"
object.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics

PARAMS = ["fp32_tflops", "amp_tflops", "bandwidth_gbs", "host_us_per_op", "fill"]
# Upper bounds that keep the fit physical: no rate above the H100/H200 datasheets' dense peaks.
BOUNDS = [200, 1000, 4800, 1000, 1]
BYTES_PER_PARAMETER = 16


def features(profile):
    trace = profile["traces"][0]
    return {
        "flops": profile["totals"].get("flops_per_step", 0),
        "amp": profile.get("precision", "fp32") != "fp32",
        "bytes": 2 * trace["allocated_bytes_per_step"]
        + BYTES_PER_PARAMETER * profile["totals"]["parameters"],
        "ops": trace["events"] / trace["steps"] / 2,  # an allocation and its free per op
    }


def predict(p, f):
    fp32, amp, bandwidth, host_us, fill = p
    gpu = f["flops"] / ((amp if f["amp"] else fp32) * 1e12) + f["bytes"] / (bandwidth * 1e9)
    host = f["ops"] * host_us * 1e-6
    step = max(gpu, host)
    return fill * gpu / step, step


def loss(p, rows):
    if any(v <= 0 or v > bound for v, bound in zip(p, BOUNDS)):
        return float("inf")
    total = 0.0
    for f, m in rows:
        smact, step = predict(p, f)
        total += (smact - m["smact"]) ** 2 + 0.05 * math.log(step * 1000 / m["step_ms"]) ** 2
    return total / len(rows)


def nelder_mead(fn, start, steps, iterations=4000):
    """Minimises fn from start (plain Nelder-Mead: five parameters, a few dozen rows)."""
    simplex = [list(start)]
    for i, s in enumerate(steps):
        point = list(start)
        point[i] += s
        simplex.append(point)
    values = [fn(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(len(simplex)), key=values.__getitem__)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centroid = [sum(x[j] for x in simplex[:-1]) / (len(simplex) - 1) for j in range(len(start))]
        worst = simplex[-1]
        reflected = [c + (c - w) for c, w in zip(centroid, worst)]
        fr = fn(reflected)
        if fr < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst)]
            fe = fn(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst)]
            fc = fn(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (x - b) for b, x in zip(best, point)]
                                    for point in simplex[1:]]
                values = [values[0]] + [fn(x) for x in simplex[1:]]
    best = min(range(len(simplex)), key=values.__getitem__)
    return simplex[best], values[best]


def load(measured_paths, profile_dirs):
    profiles = {}
    for folder in profile_dirs:
        for path in glob.glob(os.path.join(folder, "**", "*.json"), recursive=True):
            with open(path) as f:
                doc = json.load(f)
            if doc.get("format") == "colo-model-summary":
                profiles[os.path.splitext(os.path.basename(path))[0]] = doc
    rows = []
    for path in measured_paths:
        with open(path) as f:
            for line in f:
                m = json.loads(line)
                if "smact" not in m or m["id"] not in profiles:
                    continue
                f_ = features(profiles[m["id"]])
                if f_["flops"] > 0 and f_["ops"] > 0:
                    rows.append((m["set"], m["id"], f_, m))
    return rows


def summary(errors):
    a = sorted(abs(e) for e in errors)
    p90 = a[min(len(a) - 1, int(math.ceil(0.9 * len(a))) - 1)]
    return statistics.median(a), p90, max(a)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measured", required=True)
    parser.add_argument("--profiles", required=True)
    parser.add_argument("--fit-sets", default="all")
    parser.add_argument("--calibration")
    parser.add_argument("--table")
    args = parser.parse_args()
    rows = load(args.measured.split(","), args.profiles.split(","))
    fit_sets = set(args.fit_sets.split(","))
    fit_rows = [(f, m) for s, _, f, m in rows if s in fit_sets]
    start = [50.0, 300.0, 1500.0, 10.0, 0.9]
    best, value = nelder_mead(lambda p: loss(p, fit_rows), start, [20, 60, 500, 5, -0.05])
    for _ in range(3):  # restarts from the best point escape early stalls
        best, value = nelder_mead(lambda p: loss(p, fit_rows), best,
                                  [v * 0.3 * (-1 if i == 4 else 1) for i, v in enumerate(best)])
    model = dict(zip(PARAMS, (round(v, 4) for v in best)))
    print("fitted:", model, "loss", round(value, 5))

    # The baseline a model must beat: one number for every job (the fitted set's mean).
    constant = statistics.mean(m["smact"] for _, m in fit_rows)
    lines = ["| set | cases | SMACT median abs error | p90 | worst | step time median abs error |"
             f" one SMACT for all ({constant:.2f}): median abs error |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    detail = ["", "| case | set | measured SMACT | predicted | measured step | predicted step |",
              "|---|---|---:|---:|---:|---:|"]
    for which in sorted({s for s, *_ in rows}, key=lambda s: (s not in fit_sets, s)):
        errors, step_errors, baseline = [], [], []
        for s, cid, f, m in rows:
            if s != which:
                continue
            smact, step = predict(best, f)
            errors.append(smact - m["smact"])
            baseline.append(abs(constant - m["smact"]))
            step_errors.append(step * 1000 / m["step_ms"] - 1)
            detail.append(f"| {cid} | {s} | {m['smact']:.2f} | {smact:.2f} | {m['step_ms']:.1f} ms | "
                          f"{step * 1000:.1f} ms |")
        med, p90, worst = summary(errors)
        label = which + (" (fitted on)" if which in fit_sets else " (held out)")
        lines.append(f"| {label} | {len(errors)} | {med:.3f} | {p90:.3f} | {worst:.3f} | "
                     f"{100 * statistics.median(abs(e) for e in step_errors):.0f}% | "
                     f"{statistics.median(baseline):.3f} |")
    table = "\n".join(lines + detail) + "\n"
    print(table)
    if args.table:
        with open(args.table, "w") as f:
            f.write(table)
    if args.calibration:
        with open(args.calibration) as f:
            calibration = json.load(f)
        calibration["smact"] = dict(model, bytes_per_parameter=BYTES_PER_PARAMETER,
                                    fitted_on=sorted(fit_sets), cases=len(fit_rows),
                                    gpu=sorted({m["gpu"] for *_, m in rows}))
        with open(args.calibration, "w") as f:
            json.dump(calibration, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
