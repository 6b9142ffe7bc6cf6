#!/usr/bin/env python3
"""One job of the real-trace benchmark: trains a workload of workloads.json on synthetic data for
a number of iterations (or seconds) and prints one JSON line with its iteration times and memory.

    job.py WORKLOAD [--iters N | --seconds S] [--workloads workloads.json]

The model and its inputs are built by colo-profile's code from the workload's target, so
`colo-profile` describes exactly the model this job trains.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))


def load(name, path):
    with open(path) as f:
        for w in json.load(f)["workloads"]:
            if w["name"] == name:
                return w
    raise SystemExit(f"job.py: no workload '{name}' in {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workload")
    parser.add_argument("--iters", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--workloads", default=os.path.join(HERE, "workloads.json"))
    args = parser.parse_args()
    w = load(args.workload, args.workloads)

    import torch
    import colo_profile

    shape = tuple(int(x) for x in w["input_shape"].split(",")) if "input_shape" in w else None
    spec = colo_profile.ModelSpec(w["target"], input_shape=shape, seq_len=w.get("seq_len"))
    model = spec.build().cuda().train()
    opt = colo_profile.make_optimizer(w["optimizer"], model.parameters())
    times = []
    started = time.time()
    i = 0
    while True:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        inputs = spec.make_batch(w["batch"], "cuda")
        output = model(**inputs) if isinstance(inputs, dict) else model(inputs)
        loss = colo_profile.compute_loss(output, w["batch"])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
        i += 1
        done = len(times)
        if args.iters and done >= args.iters:
            break
        if args.seconds and time.time() - started >= args.seconds and done >= 3:
            break
        if not args.iters and not args.seconds and done >= 100:
            break
    ordered = sorted(times)
    print(json.dumps({
        "workload": w["name"], "iters": len(times), "wall_s": round(time.time() - started, 3),
        "median_iter_ms": round(1000 * ordered[len(ordered) // 2], 3),
        "mean_iter_ms": round(1000 * sum(times) / len(times), 3),
        "max_reserved_bytes": torch.cuda.max_memory_reserved(),
        "pid": os.getpid(), "attempt": os.environ.get("COLO_ATTEMPT"),
        "mps_threads": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
    }), flush=True)


if __name__ == "__main__":
    main()
