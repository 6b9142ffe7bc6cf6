#!/usr/bin/env python3
"""GPUMemNet's published estimators, as published, beside the thesis' numbers: on GPUMemNet's own
published data, on the real models it was tested on, and on colo's evaluation sets.

    gpumemnet_published.py GPUMEMNET_CHECKOUT [--weights W.json] [--colo build/bin/colo] [--out DIR]

GPUMEMNET_CHECKOUT is a copy of github.com/itu-rad/GPUMemNet (its files carry no license, so none
of them is kept in colo). The script imports every checkpoint it publishes with
colo-gpumemnet-import (into --weights, default a temporary file), then
  1. measures each classifier on the published CSVs' held-out split (colo-gpumemnet-train
     --evaluate): Datasets/MLP/mlp_data_step2.csv, and a CNN CSV given with --cnn-csv (the final
     one is listed in that repository without contents; `git show f5a3f5d:cnn_data_step1.csv` is
     the one snapshot whose contents are published);
  2. answers for the real CNNs of Test_Pipeline/cnn_models beside the peaks and classes in
     Test_Pipeline/GPUMemNet_CNN.xlsx (read with the standard library), and for the Transformers
     of Test_Pipeline/Trans_models (no measured peaks are published for those);
  3. answers for every case of colo's evaluation sets kept here (bench/estimate/results-*), whose
     truths are NVML peaks.
Standard library only; writes table.md (and cases.csv) to --out.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MIB = 2 ** 20


def run(cmd, **kwargs):
    out = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return out.stdout


def xlsx_rows(path):
    """The first sheet's rows as lists of strings (shared strings resolved)."""
    with zipfile.ZipFile(path) as z:
        strings = re.findall(r"<t[^>]*>([^<]*)</t>", z.read("xl/sharedStrings.xml").decode())
        sheet = z.read("xl/worksheets/sheet1.xml").decode()
    rows = []
    for row in re.findall(r"<row[^>]*>(.*?)</row>", sheet):
        cells = {}
        for ref, attrs, value in re.findall(r'<c r="([A-Z]+)\d+"([^>]*)>(?:<f>[^<]*</f>)?<v>([^<]*)</v>', row):
            cells[ref] = strings[int(value)] if 't="s"' in attrs else value
        rows.append(cells)
    return rows


def estimate(colo, summary, weights, names, batch=None, gpu=None):
    cmd = [colo, "estimate", summary, "--json", "--gpumemnet-paper-weights", weights]
    for name in names:
        cmd += ["--estimator", name]
    if batch:
        cmd += ["--batch", str(batch)]
    if gpu:
        cmd += ["--gpu", gpu]
    return {e["estimator"]: e for e in json.loads(run(cmd))["estimates"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkout", help="a copy of github.com/itu-rad/GPUMemNet")
    parser.add_argument("--weights", help="the imported weights (default: a temporary file)")
    parser.add_argument("--colo", default=os.path.join(ROOT, "build", "bin", "colo"))
    parser.add_argument("--cnn-csv", help="a published CNN CSV with contents (cnn_data_step1.csv of f5a3f5d)")
    parser.add_argument("--out", help="write table.md and cases.csv here")
    args = parser.parse_args()
    bin_dir = os.path.dirname(os.path.abspath(args.colo))
    work = tempfile.mkdtemp(prefix="gpumemnet-published-")
    weights = args.weights or os.path.join(work, "gpumemnet-paper.json")
    checkpoints = sorted(glob.glob(os.path.join(args.checkout, "Ensemble", "trained_models", "*", "*.ckpt")) +
                         glob.glob(os.path.join(args.checkout, "Test_Pipeline", "estimator", "*.ckpt")) +
                         glob.glob(os.path.join(args.checkout, "Analysis", "*", "*", "cnn_mlp_8g.ckpt")))
    if not checkpoints:
        sys.exit(f"{args.checkout}: no GPUMemNet checkpoint found")
    if os.path.exists(weights):
        os.remove(weights)
    for ckpt in checkpoints:
        # The analysis notebook's CNN estimator has the test pipeline's name: told apart.
        name = "cnn_mlp_8g-analysis" if "Analysis" in ckpt else None
        run([os.path.join(bin_dir, "colo-gpumemnet-import"), ckpt, "-o", weights] + (["--name", name] if name else []))
    lines = ["# GPUMemNet's published estimators, as published", ""]
    names = [e["name"] for e in json.load(open(weights))["ensembles"] if e.get("source")]

    # 1. The published data.
    csvs = [os.path.join(args.checkout, "Datasets", "MLP", "mlp_data_step2.csv")] + ([args.cnn_csv] if args.cnn_csv else [])
    csvs = [c for c in csvs if os.path.exists(c) and os.path.getsize(c) > 1000]
    if csvs:
        out = run([os.path.join(bin_dir, "colo-gpumemnet-train"), "--evaluate", weights, "--published", *csvs])
        for path in csvs:  # said by where they are in (or beside) the repository
            out = out.replace(path, os.path.relpath(path, args.checkout) if path.startswith(args.checkout)
                              else os.path.basename(path))
        lines += ["## On GPUMemNet's published data (held-out split as its loaders make it)", "", "```", out.strip(), "```", ""]

    # 2. The real CNNs of its test pipeline, with the peaks it measured.
    cases = []
    sheet = os.path.join(args.checkout, "Test_Pipeline", "GPUMemNet_CNN.xlsx")
    cnn = [e["name"] for e in json.load(open(weights))["ensembles"] if e.get("source") and e["family"] == "cnn"]
    files = {"vgg": "vgg", "resnet": "resnet50", "Xception": "Xception", "mobilenet": "mobilenet",
             "efficientnet": "efficientnet", "inception": "inceptionv3"}
    if os.path.exists(sheet):
        model = None
        table = ["| model | batch | measured (MB) | thesis class | " + " | ".join(cnn) + " |",
                 "|---|---|---|---|" + "---|" * len(cnn)]
        diffs = {n: [] for n in cnn}
        thesis = []
        for row in xlsx_rows(sheet)[1:]:
            model = row.get("A", model)
            if "B" not in row or "C" not in row or model not in files:
                continue
            batch, truth, klass = int(row["B"]), float(row["C"]), int(row["D"])
            thesis.append(float(row["F"]))
            summary = os.path.join(args.checkout, "Test_Pipeline", "cnn_models", f"{files[model]}_{batch}.model")
            answers = estimate(args.colo, summary, weights, [f"gpumemnet-paper:{n}" for n in cnn], batch)
            cells = []
            for n in cnn:
                e = answers[f"gpumemnet-paper:{n}"]
                upper = e["upper"] / MIB
                diffs[n].append(upper - truth)
                cells.append(f"{int(e['lower'] // (8000 * MIB))} ({upper - truth:+.0f})")
                cases.append({"set": "GPUMemNet real CNNs", "case": f"{model}-b{batch}", "estimator": n,
                              "truth_mib": truth, "upper_mib": upper})
            table.append(f"| {model} | {batch} | {truth:.0f} | {klass} | " + " | ".join(cells) + " |")
        table.append(f"| mean over-provisioning (MB) | | | {statistics.mean(thesis):+.0f} (thesis) | " +
                     " | ".join(f"{statistics.mean(d):+.0f}" for d in diffs.values()) + " |")
        lines += ["## GPUMemNet's real CNNs (Test_Pipeline/cnn_models; peaks and classes from GPUMemNet_CNN.xlsx)", "",
                  "Each cell: the class (8 GB buckets) and the bucket's upper edge minus the measured peak, MB.", ""] + table + [""]

    # The real Transformers of its test pipeline: no peaks published.
    trans = [e["name"] for e in json.load(open(weights))["ensembles"] if e.get("source") and e["family"] == "transformer"]
    summaries = sorted(glob.glob(os.path.join(args.checkout, "Test_Pipeline", "Trans_models", "*.txt")))
    if summaries and trans:
        table = ["| summary | " + " | ".join(trans) + " | Horus |", "|---|" + "---|" * (len(trans) + 1)]
        for summary in summaries:
            answers = estimate(args.colo, summary, weights, [f"gpumemnet-paper:{n}" for n in trans] + ["horus"])
            table.append(f"| {os.path.basename(summary)} | " +
                         " | ".join(f"{answers[f'gpumemnet-paper:{n}']['upper'] / MIB:.0f} MiB" for n in trans) +
                         f" | {answers['horus']['peak'] / MIB:.0f} MiB |")
        lines += ["## GPUMemNet's real Transformers (Test_Pipeline/Trans_models; upper edge of the bucket)", ""] + table + [""]

    # 3. colo's evaluation sets.
    sets = [("H100 main", "results-h100-2026-11-23/fragmentation-probe/main", "H100"),
            ("H100 held-out", "results-h100-2026-11-23/fragmentation-probe/heldout", "H100"),
            ("H100 users' code", "results-h100-2026-11-23/fragmentation-probe/user", "H100")]
    table = ["| set | estimator | cases | median abs. error | under | worst under | mean over-provisioning |",
             "|---|---|---|---|---|---|---|"]
    every = ["gpumemnet-paper"] + [f"gpumemnet-paper:{n}" for n in names]
    for label, folder, gpu in sets:
        base = os.path.join(HERE, folder)
        extracted = os.path.join(work, folder.replace("/", "-"))
        with tarfile.open(os.path.join(base, "cases-and-traces.tgz")) as t:
            t.extractall(extracted)
        truths = {r["id"]: int(r["truth_bytes"]) for r in csv.DictReader(open(os.path.join(base, "cases.csv")))}
        results = {n: [] for n in every}
        for case, truth in truths.items():
            summary = os.path.join(extracted, "cases", case + ".json")
            answers = estimate(args.colo, summary, weights, every, gpu=gpu)
            for n in every:
                e = answers[n]
                if "upper" in e:
                    results[n].append((e["upper"], truth))
                    cases.append({"set": label, "case": case, "estimator": n, "truth_mib": truth / MIB,
                                  "upper_mib": e["upper"] / MIB})
        for n, pairs in results.items():
            if not pairs:
                continue
            errors = [(u - t) / t for u, t in pairs]
            under = [e for e in errors if e < 0]
            table.append(f"| {label} | {n} | {len(pairs)} | {statistics.median(abs(e) for e in errors) * 100:.1f}% | "
                         f"{len(under)} | {min(under) * 100 if under else 0:.1f}% | "
                         f"{statistics.mean(max(0, u - t) for u, t in pairs) / 2 ** 30:.2f} GiB |")
    lines += ["## colo's evaluation sets (truth: NVML peaks; the bucket's upper edge is what a scheduler plans with)", ""] + table + [""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        open(os.path.join(args.out, "table.md"), "w").write(text + "\n")
        with open(os.path.join(args.out, "cases.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["set", "case", "estimator", "truth_mib", "upper_mib"])
            w.writeheader()
            w.writerows(cases)


if __name__ == "__main__":
    main()
