#!/usr/bin/env python3
"""Every evaluation set kept in bench/estimate estimated again by a colo, against its kept truths:
per set the point estimate's median error, the planned bounds under the truth, and the median and
largest over-provisioning of what colo plans with.

    sets.py [--colo build/bin/colo] [--calibration CALIBRATION.json] [--profiles DIR]...

--calibration estimates with a colo-calibrate output's convolution catalogue and coefficients in
place of the shipped ones of its GPU (its margins kept); --profiles takes a case's profile from DIR
where DIR has one (new profiles of kept cases, as bench/estimate/unseen.sh makes). Standard
library only.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# name, truths, the archive with the profiles, the GPU whose calibration answers.
SETS = [
    ("H100 main", "results-h100-2026-11-23/fragmentation-probe/main", "results-h100-2026-11-23/fragmentation-probe/main", "H100"),
    ("H100 held-out", "results-h100-2026-11-23/fragmentation-probe/heldout", "results-h100-2026-11-23/fragmentation-probe/heldout", "H100"),
    ("H100 users' code", "results-h100-2026-11-23/fragmentation-probe/user", "results-h100-2026-11-23/fragmentation-probe/user", "H100"),
    ("H200 main", "results-h200-2026-11-23/fragmentation-probe/main", "results-h100-2026-11-23/fragmentation-probe/main", "H200"),
    ("H200 held-out", "results-h200-2026-11-23/fragmentation-probe/heldout", "results-h100-2026-11-23/fragmentation-probe/heldout", "H200"),
    ("H100 main, earlier profiles", "results-h100-2026-11-23/main", "results-h100-2026-11-23/main", "H100"),
    ("H100 held-out, earlier profiles", "results-h100-2026-11-23/heldout", "results-h100-2026-11-23/heldout", "H100"),
    ("H100 users' code, earlier profiles", "results-h100-2026-11-23/user", "results-h100-2026-11-23/user", "H100"),
    ("H200 main, 2026-11-21", "results-h200-2026-11-21", "results-h200-2026-11-21", "H200"),
    ("H200 held-out, 2026-11-21", "results-h200-2026-11-21/heldout", "results-h200-2026-11-21/heldout", "H200"),
    ("H200 unseen, 2026-11-27", "results-h200-2026-11-27-unseen", "results-h200-2026-11-27-unseen", "H200"),
]


def data_dir_with(calibration_path, work):
    """A copy of colo's data whose calibration of that GPU has the new catalogue and coefficients."""
    data = os.path.join(work, "data")
    shutil.copytree(os.path.join(ROOT, "data"), data)
    with open(calibration_path) as f:
        new = json.load(f)
    for path in glob.glob(os.path.join(data, "gpu-calibration", "*.json")):
        with open(path) as f:
            shipped = json.load(f)
        if shipped.get("gpu") == new.get("gpu"):
            shipped["conv_workspace"] = new["conv_workspace"]
            with open(path, "w") as f:
                json.dump(shipped, f)
            return data
    sys.exit(f"no shipped calibration of {new.get('gpu')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--colo", default=os.path.join(ROOT, "build", "bin", "colo"))
    parser.add_argument("--calibration")
    parser.add_argument("--profiles", action="append", default=[])
    parser.add_argument("--only", help="the sets whose name contains this")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="colo-sets-")
    env = dict(os.environ)
    if args.calibration:
        env["COLO_DATA_DIR"] = data_dir_with(args.calibration, work)
    for name, truths, archive_dir, gpu in SETS:
        if args.only and args.only not in name:
            continue
        archives = glob.glob(os.path.join(HERE, archive_dir, "*cases-and-traces.tgz"))
        truth_csv = os.path.join(HERE, truths, "cases.csv")
        if not archives or not os.path.exists(truth_csv):
            continue
        extracted = os.path.join(work, archive_dir.replace("/", "-"))
        with tarfile.open(archives[0]) as t:
            t.extractall(extracted)
        errors, overs, under = [], [], []
        for row in csv.DictReader(open(truth_csv)):
            summary = next((p for d in args.profiles for p in [os.path.join(d, row["id"] + ".json")]
                            if os.path.exists(p)), None)
            summary = summary or next(iter(glob.glob(os.path.join(extracted, "**", "cases", row["id"] + ".json"),
                                                     recursive=True)), None)
            if not summary:
                continue
            out = subprocess.run([args.colo, "estimate", summary, "--estimator", "trace", "--gpu", gpu, "--json"],
                                 capture_output=True, text=True, env=env)
            estimate = json.loads(out.stdout)["estimates"][0] if out.returncode == 0 else {}
            if "peak" not in estimate:
                print(f"  {row['id']}: no estimate: {estimate.get('error', out.stderr.strip())}")
                continue
            truth = int(row["truth_bytes"])
            errors.append(abs(estimate["peak"] - truth) / truth)
            over = (estimate["upper"] - truth) / truth
            overs.append(over)
            if over < 0:
                under.append(f"{row['id']} {over * 100:+.1f}%")
        if errors:
            print(f"{name}: {len(errors)} cases, point median {statistics.median(errors) * 100:.1f}%, "
                  f"planned under {len(under)}{' ' + str(under) if under else ''}, "
                  f"median over {statistics.median(overs) * 100:.1f}%, max over {max(overs) * 100:.1f}%")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
