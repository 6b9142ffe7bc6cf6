#!/usr/bin/env python3
"""The catalogue `colo sim` predicts a run with before it runs (sim_compare.py's catalogue.json
format), for the workloads of workloads.json, from earlier measurements only:

  * the workloads an earlier real-trace run measured: that run's catalogue (iteration time,
    start-up and exit overhead, SM activity, peak; its power fit), as measured;
  * the workloads that are bench/estimate cases (`case` in workloads.json): the step time, SM
    activity and peak the estimator benchmark measured on the card alone, with the overhead of
    the base catalogue's workloads of their kind (CNNs, transformers);
  * the workloads at a larger batch than any measured (`scale_of` in workloads.json: the workload
    measured at a smaller batch, and two bench/estimate cases of the same model at two batches):
    the smaller one's entry with its iteration time scaled by the batch ratio (a step that fills
    the GPU takes time in proportion to its samples) and its peak raised by the bytes per sample
    between the two cases, times the added samples;
  * data-parallel runs on 2 GPUs (job.py --gpus 2) of workloads never measured so: the single-GPU
    entry scaled by what the base catalogue's 2-GPU runs showed (iteration time x1.92 for twice the
    samples, per-GPU SM activity x0.55), the first GPU's peak raised by one copy of the gradients
    (the replicas' gradients are summed there; the profile's parameter bytes).

    prior_catalogue.py --base RESULTS/sim/catalogue.json --card H100 --profiles DIR -o cat.json

--card picks bench/estimate's measurements (H100 or H200) and the power fit: the base catalogue's
for the card it was measured on, none (the simulator's own) otherwise. Also writes the solo file
make_trace.py reads (--solo-out): each workload's class, iteration time, SM activity and peak.
"""

import argparse
import csv
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
ESTIMATE = os.path.join(HERE, "..", "estimate")
RESULTS = {"H100": "results-h100-2026-11-23", "H200": "results-h200-2026-11-23"}
PEAKS = {"H100": "results-h100-2026-11-23/main/cases.csv", "H200": "results-h200-2026-11-21/cases.csv"}
TWO_GPU_ITER, TWO_GPU_SMACT = 1.92, 0.55


def scaled(w, known, batches, peaks, gpus=1):
    """The entry of a workload at a batch never measured, from the same model's at a smaller one."""
    spec = w["scale_of"]
    small = known[f"{spec['workload']}/{gpus}"]
    small_batch = batches[spec["workload"]]
    ratio = w["batch"] / small_batch
    (case_a, batch_a), (case_b, batch_b) = spec["cases"]
    per_sample = (peaks[case_b] - peaks[case_a]) / (batch_b - batch_a)
    return dict(small, jobs=0, iter_s=small["iter_s"] * ratio,
                peak_bytes=round(small["peak_bytes"] + per_sample * (w["batch"] - small_batch)),
                source=f"{spec['workload']} on {gpus} GPU(s) at batch {small_batch}: iteration x{ratio:g}, "
                       f"peak + {per_sample / 2**20:.0f} MiB a sample ({case_a} to {case_b})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="an earlier run's sim/catalogue.json")
    parser.add_argument("--base-card", default="H200", help="the card the base run was measured on")
    parser.add_argument("--card", required=True, choices=sorted(RESULTS))
    parser.add_argument("--profiles", required=True, help="colo-profile summaries, NAME.json")
    parser.add_argument("--workloads", default=os.path.join(HERE, "workloads.json"))
    parser.add_argument("--only", help="comma-separated workload names (default: all)")
    parser.add_argument("--solo-out", help="also write make_trace.py's solo file here")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    base = json.load(open(args.base))
    workloads = json.load(open(args.workloads))["workloads"]
    batches = {w["name"]: w["batch"] for w in workloads}
    if args.only:
        keep = set(args.only.split(","))
        workloads = [w for w in workloads if w["name"] in keep]
    steps = {}
    for path in glob.glob(os.path.join(ESTIMATE, RESULTS[args.card], "smact", "*.jsonl")):
        for line in open(path):
            row = json.loads(line)
            steps[row["id"]] = row
    peaks = {r["id"]: int(r["truth_bytes"]) for r in csv.DictReader(open(os.path.join(ESTIMATE, PEAKS[args.card])))}
    cnn = [v["overhead_s"] for k, v in base.items() if k.endswith("/1") and not k.startswith("bert")
           and v["smact"] > 0.3]
    startup_cnn = [v["startup_s"] for k, v in base.items() if k.endswith("/1") and not k.startswith("bert")
                   and v["smact"] > 0.3]
    out, solo = {}, []
    for w in workloads:
        key = f"{w['name']}/1"
        if key in base:
            entry = dict(base[key], source=base[key].get("source", "measured by the base run"))
        elif "case" in w:
            case = w["case"]
            transformer = w["target"].startswith("hf:")
            like = base["bert-base-s512/1"] if transformer else None
            entry = {"jobs": 0, "iter_s": steps[case]["step_ms"] / 1000,
                     "overhead_s": like["overhead_s"] if like else statistics.mean(cnn),
                     "startup_s": like["startup_s"] if like else statistics.mean(startup_cnn),
                     "smact": steps[case]["smact"], "peak_bytes": peaks[case],
                     "source": f"bench/estimate {case} on the {args.card}; overhead of the base run's "
                               + ("BERT-base" if like else "ImageNet CNNs")}
        elif "scale_of" in w:
            entry = scaled(w, out, batches, peaks)
        else:
            continue
        out[key] = entry
        two = f"{w['name']}/2"
        if "scale_of" in w and f"{w['scale_of']['workload']}/2" in out:
            out[two] = scaled(w, out, batches, peaks, gpus=2)
        elif two in base:
            out[two] = dict(base[two], source=base[two].get("source", "measured by the base run"))
        else:
            summary = json.load(open(os.path.join(args.profiles, w["name"] + ".json")))
            grads = summary["totals"]["parameter_bytes"]
            out[two] = dict(entry, iter_s=entry["iter_s"] * TWO_GPU_ITER,
                            smact=entry["smact"] * TWO_GPU_SMACT,
                            peak_bytes=entry["peak_bytes"] + grads,
                            source=entry["source"] + f"; 2 GPUs: x{TWO_GPU_ITER} time, "
                                   f"x{TWO_GPU_SMACT} SM activity, + one gradient copy")
        solo.append({"name": w["name"], "class": w["class"],
                     "median_iter_ms": round(entry["iter_s"] * 1000, 3), "smact": entry["smact"],
                     "peak_nvml_bytes": entry["peak_bytes"]})
    out["power_fit"] = base["power_fit"] if args.card == args.base_card else None
    json.dump(out, open(args.output, "w"), indent=1)
    if args.solo_out:
        json.dump({"note": f"prior_catalogue.py --card {args.card}: iteration times and peaks "
                           "measured earlier (the base run, bench/estimate)", "workloads": solo},
                  open(args.solo_out, "w"), indent=1)


if __name__ == "__main__":
    main()
