#!/usr/bin/env python3
"""Turns an evaluation run (evaluate.py's DIR) into the estimator table: every estimator's answer
from `colo estimate` next to the peak NVML measured for the same case.

    report.py DIR [--colo build/bin/colo] [--replay build/bin/colo-replay] [--out RESULTS_DIR]

Per estimator: median and p90 absolute relative error of its estimate, the share of cases where
what the scheduler would plan with is below the truth, the worst under-estimate, the mean
over-provisioning, and the median time of one estimate. It also replays torch's own allocator
history of every real run through colo's allocator model (colo-replay) and compares the peak
reserved bytes. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

GIB = 2 ** 30


def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    parser.add_argument("--colo", default=os.path.join(root, "build", "bin", "colo"))
    parser.add_argument("--replay", default=os.path.join(root, "build", "bin", "colo-replay"))
    parser.add_argument("--out", help="write cases.csv and table.md here")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--gpu", default="H200", help="the GPU whose calibration colo estimate uses")
    parser.add_argument("--calibration",
                        help="a colo-calibrate output whose convolution catalogue and coefficients "
                             "replace the shipped ones of its GPU (its margins kept)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.calibration:
        import tempfile

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from sets import data_dir_with

        env["COLO_DATA_DIR"] = data_dir_with(args.calibration, tempfile.mkdtemp(prefix="colo-report-"))

    rows = [json.loads(line) for line in open(os.path.join(args.dir, "results.jsonl")) if line.strip()]
    rows = [r for r in rows if r.get("run_rc") == 0 and r.get("profile_rc") == 0 and r.get("nvml_peak_bytes")]
    estimators = ["trace", "gpumemnet", "gpumemnet:2GiB", "gpumemnet-paper", "horus"]
    results = {name: [] for name in estimators + ["trace+margin", "fake-tensor"]}
    cases = []
    replay_exact = replay_total = 0
    replay_errors = []
    for r in rows:
        summary = os.path.join(args.dir, "cases", r["id"] + ".json")
        cmd = [args.colo, "estimate", summary, "--json", "--repeat", str(args.repeat), "--gpu", args.gpu]
        for name in estimators:
            cmd += ["--estimator", name]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            print(f"{r['id']}: colo estimate failed: {out.stderr.strip()}", file=sys.stderr)
            continue
        report = json.loads(out.stdout)
        truth = r["nvml_peak_bytes"]
        case = {"id": r["id"], "truth_bytes": truth, "family": report["family"]}
        for e in report["estimates"]:
            if "peak" not in e:
                case[e["estimator"]] = None
                case[e["estimator"] + ":error"] = e.get("error", "")
                continue
            planned = e["upper"] if e["estimator"] == "trace" else e["peak"]
            results[e["estimator"]].append((e["peak"], e["peak"], truth, e["micros"]))
            case[e["estimator"]] = e["peak"]
            if e["estimator"] == "trace":
                results["trace+margin"].append((e["upper"], planned, truth, e["micros"]))
                case["trace_upper"] = e["upper"]
        with open(summary) as f:
            live = json.load(f)["traces"][0]["peak_live_bytes"]
        results["fake-tensor"].append((live, live, truth, 0.0))
        case["fake_tensor_live"] = live
        # The allocator model on torch's own history of the real run.
        real = os.path.join(args.dir, "real", r["id"] + ".trace")
        prefix = [os.path.join(args.dir, "cases", t["file"]) for t in json.load(open(summary))["traces"]][0]
        rep = subprocess.run([args.replay, "--prefix", prefix, real], capture_output=True, text=True)
        if rep.returncode == 0:
            model = json.loads(rep.stdout)["peak_reserved"]
            replay_total += 1
            replay_exact += model == r["peak_reserved_bytes"]
            replay_errors.append((model - r["peak_reserved_bytes"]) / r["peak_reserved_bytes"])
            case["replayed_real_reserved"] = model
            case["torch_reserved"] = r["peak_reserved_bytes"]
        cases.append(case)

    lines = ["| estimator | cases | median abs. error | p90 abs. error | under-estimated | worst under | mean over-provisioning | time per estimate: median (max) |",
             "|---|---|---|---|---|---|---|---|"]
    labels = {
        "trace": "**colo trace replay** (estimate)",
        "trace+margin": "**colo trace replay + margin** (what colo plans with)",
        "gpumemnet": "GPUMemNet, thesis buckets (1 GiB MLP, 8 GiB CNN/Transformer)",
        "gpumemnet:2GiB": "GPUMemNet, 2 GiB buckets",
        "gpumemnet:1GiB": "GPUMemNet, 1 GiB buckets",
        "gpumemnet-paper": "GPUMemNet as published (its features, data and ensemble)",
        "horus": "Horus (CARMA's formula)",
        "fake-tensor": "FakeTensor live bytes alone (no allocator, no context)",
    }
    for name in ["trace", "trace+margin", "gpumemnet", "gpumemnet:2GiB", "gpumemnet-paper", "horus",
                 "fake-tensor"]:
        data = results[name]
        if not data:
            # An estimator that answered for no case still gets its row: why it did not answer.
            reasons = sorted({c.get(name + ":error", "") for c in cases} - {""})
            if name in estimators and reasons:
                lines.append(f"| {labels[name]} | 0 of {len(cases)} | - | - | - | - | - | "
                             f"{'; '.join(reasons)} |")
            continue
        errors = [abs(est - t) / t for est, _, t, _ in data]
        unders = [(planned - t) / t for _, planned, t, _ in data if planned < t]
        over = [max(0, planned - t) / GIB for _, planned, t, _ in data]
        micros = [m for *_, m in data]
        lines.append(
            f"| {labels[name]} | {len(data)} | {100 * statistics.median(errors):.1f}% | "
            f"{100 * percentile(errors, 0.9):.1f}% | {100 * len(unders) / len(data):.0f}% | "
            f"{(100 * min(unders)) if unders else 0:.1f}% | {statistics.mean(over):.2f} GiB | "
            + (f"{statistics.median(micros):.0f} µs ({max(micros):.0f} µs) |" if name != "fake-tensor" else "- |"))
    # Per model family: the point estimate and what colo plans with.
    lines += ["", "| family | cases | trace: median abs. error | trace: worst under | planned: under | planned: median over | planned: max over |",
              "|---|---|---|---|---|---|---|"]
    for family in sorted({c["family"] for c in cases}):
        fam = [c for c in cases if c["family"] == family and c.get("trace") is not None]
        if not fam:
            continue
        err = [(c["trace"] - c["truth_bytes"]) / c["truth_bytes"] for c in fam]
        over = [(c["trace_upper"] - c["truth_bytes"]) / c["truth_bytes"] for c in fam]
        lines.append(f"| {family} | {len(fam)} | {100 * statistics.median(map(abs, err)):.1f}% | "
                     f"{100 * min(0, min(err)):.1f}% | {sum(o < 0 for o in over)} | "
                     f"{100 * statistics.median(over):.1f}% | {100 * max(over):.1f}% |")
    table = "\n".join(lines)
    print(table)
    print(f"\nallocator model on torch's own history: {replay_exact}/{replay_total} peaks reserved "
          f"identical to the byte; largest difference {100 * max(map(abs, replay_errors), default=0):.3f}%")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "table.md"), "w") as f:
            f.write(table + "\n")
            f.write(f"\nAllocator model replaying torch's own allocation history: {replay_exact}/"
                    f"{replay_total} peak-reserved values identical to the byte.\n")
        keys = ["id", "family", "truth_bytes", "trace", "trace_upper", "gpumemnet", "gpumemnet:2GiB",
                "gpumemnet:1GiB", "gpumemnet-paper", "horus", "fake_tensor_live", "torch_reserved", "replayed_real_reserved"]
        with open(os.path.join(args.out, "cases.csv"), "w") as f:
            f.write(",".join(keys) + "\n")
            for c in cases:
                f.write(",".join("" if c.get(k) is None else str(c.get(k)) for k in keys) + "\n")


if __name__ == "__main__":
    main()
