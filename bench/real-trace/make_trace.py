#!/usr/bin/env python3
"""Builds the real-trace benchmark's job trace from the solo profiles: the thesis' Philly arrival
gaps scaled down, a light/medium/heavy mix like the 90-task trace (65/27/8%), each job's iteration
count chosen for a solo duration drawn uniformly from [--min-s, --max-s].

    make_trace.py SOLO.json --jobs 30 --gap-scale 0.1 --min-s 20 --max-s 120 [--seed 1]
                  [--gpus 2 --two-gpu-jobs 2] [--startup-s 9] [--mix 0.65,0.27,0.08]
                  [--catalogue RESULTS/sim/catalogue.json]
                  [--class-seconds light=120:240,medium=480:840,heavy=480:1000] -o trace.json

--catalogue sizes the iterations with another machine's iteration times (sim_compare.py's catalogue,
taken from a run's exclusive mode) instead of SOLO.json's: the light jobs, bound by the CPU's kernel
launches, iterate at different speeds on different hosts. SOLO.json still gives the workloads, their
classes and SM activity.
--class-seconds draws each class's solo duration from its own range (classes not named keep
[--min-s, --max-s]), e.g. to give the classes the thesis' shares of the GPU time.

--two-gpu-jobs K makes K of the medium and heavy jobs (--two-gpu-classes) data-parallel on 2 GPUs
(job.py --gpus 2, each replica with the workload's batch; --two-gpu-cost is their iteration time over
the solo one's, or the catalogue's 2-GPU entry where it has one). They keep the iterations drawn for
one GPU, so they run --two-gpu-cost times longer; with --two-gpu-same-length their iterations are
drawn for the duration on 2 GPUs instead.
Prints the exclusive lower bound (the GPU-seconds of solo work plus each job's start-up, over the
GPUs) so the trace can be sized to the time at hand.
"""

import argparse
import json
import random

# The inter-arrival seconds of the first 90 non-failed Philly jobs of 2017-12-20 (Jeon et al., ATC'19).
PHILLY_GAPS = [0, 73, 441, 52, 51, 365, 18, 166, 439, 83, 23, 56, 260, 26, 313, 17, 301, 187, 8, 56,
               31, 52, 84, 465, 199, 272, 125, 4, 286, 283, 30, 63, 341, 196, 88, 9, 4, 2, 2, 3, 108,
               232, 152, 249, 52, 300, 419, 181, 49, 1, 272, 247, 30, 221, 19, 100, 256, 4, 589, 11,
               95, 370, 91, 45, 197, 147, 257, 0, 175, 208, 191, 24, 94, 126, 74, 5, 7, 294, 394, 123,
               83, 30, 36, 228, 80, 65, 2, 4, 60, 43]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("solo")
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--gap-scale", type=float, default=0.1)
    parser.add_argument("--min-s", type=float, default=20)
    parser.add_argument("--max-s", type=float, default=120)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gap-offset", type=int, default=0,
                        help="start at this Philly gap (the first job arrives at 0): a short "
                             "trace takes its load from the burst it is cut from")
    parser.add_argument("--two-gpu-jobs", type=int, default=0)
    parser.add_argument("--two-gpu-cost", type=float, default=1.15)
    parser.add_argument("--two-gpu-classes", default="medium,heavy")
    parser.add_argument("--two-gpu-same-length", action="store_true")
    parser.add_argument("--startup-s", type=float, default=9,
                        help="a job's start-up before its first step (interpreter, imports, model)")
    parser.add_argument("--mix", default="0.65,0.27,0.08",
                        help="the light, medium and heavy shares (default: the 90-task trace's)")
    parser.add_argument("--catalogue", help="per-workload iteration times measured on the target "
                                             "machine (sim_compare.py's catalogue.json)")
    parser.add_argument("--class-seconds", default="",
                        help="per-class solo duration ranges, e.g. light=120:240,medium=480:840")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    shares = [float(x) for x in args.mix.split(",")]
    if len(shares) != 3 or min(shares) < 0 or abs(sum(shares) - 1) > 1e-6:
        parser.error("--mix takes three non-negative shares that add up to 1")
    mix = dict(zip(("light", "medium", "heavy"), shares))
    seconds_of = {c: (args.min_s, args.max_s) for c in mix}
    for item in filter(None, args.class_seconds.split(",")):
        cls, _, span = item.partition("=")
        low, _, high = span.partition(":")
        try:
            low, high = float(low), float(high)
        except ValueError:
            parser.error(f"--class-seconds: '{item}' is not CLASS=MIN:MAX")
        if cls not in seconds_of or not 0 < low <= high:
            parser.error(f"--class-seconds: '{item}' needs a class of {', '.join(mix)} and 0 < MIN <= MAX")
        seconds_of[cls] = (low, high)
    solo = [w for w in json.load(open(args.solo))["workloads"] if "median_iter_ms" in w]
    measured = {}
    if args.catalogue:
        measured = json.load(open(args.catalogue))
        solo = [dict(w, median_iter_ms=measured[f"{w['name']}/1"]["iter_s"] * 1000) for w in solo
                if f"{w['name']}/1" in measured]
    rng = random.Random(args.seed)
    # Exact class counts in the mix's proportions (largest remainders), in random order.
    want = {c: args.jobs * f for c, f in mix.items()}
    counts = {c: int(v) for c, v in want.items()}
    for c in sorted(want, key=lambda c: want[c] - counts[c], reverse=True)[: args.jobs - sum(counts.values())]:
        counts[c] += 1
    classes = [c for c, n in counts.items() for _ in range(n)]
    rng.shuffle(classes)
    jobs, t = [], 0.0
    for i, cls in enumerate(classes):
        if i > 0:
            t += PHILLY_GAPS[(args.gap_offset + i) % len(PHILLY_GAPS)] * args.gap_scale
        w = rng.choice([w for w in solo if w["class"] == cls])
        seconds = rng.uniform(*seconds_of[cls])
        iters = max(10, round(seconds * 1000 / w["median_iter_ms"]))
        jobs.append({"id": i + 1, "arrival_s": round(t, 2), "workload": w["name"], "class": cls,
                     "iters": iters, "solo_s": round(iters * w["median_iter_ms"] / 1000, 1),
                     "smact": round(w["smact"], 3)})
    big = [j for j in jobs if j["class"] in args.two_gpu_classes.split(",")]
    for j in rng.sample(big, min(args.two_gpu_jobs, len(big))):
        j["gpus"] = 2
        one = j["solo_s"] / j["iters"]
        two = measured.get(f"{j['workload']}/2", {}).get("iter_s", one * args.two_gpu_cost)
        if args.two_gpu_same_length:
            j["iters"] = max(10, round(j["solo_s"] / two))
        j["solo_s"] = round(j["iters"] * two, 1)
    total = sum((j["solo_s"] + args.startup_s) * j.get("gpus", 1) for j in jobs)
    json.dump({"gap_scale": args.gap_scale, "seed": args.seed, "mix": mix, "jobs": jobs},
              open(args.output, "w"), indent=1)
    print(f"{len(jobs)} jobs ({counts}), arrivals over {t:.0f} s, solo work {total:.0f} s: "
          f"(start-up included) exclusive takes at least {max(t, total / args.gpus):.0f} s on {args.gpus} GPU(s)")


if __name__ == "__main__":
    main()
