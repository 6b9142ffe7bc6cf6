#!/usr/bin/env python3
"""One job of the real-trace benchmark: trains a workload of workloads.json on synthetic data for
a number of iterations (or seconds) and prints one JSON line with its iteration times, memory and
start-up time (process start to the first training step).

    job.py WORKLOAD [--iters N | --seconds S] [--gpus G] [--log FILE] [--workloads workloads.json]

With --gpus G > 1 it trains data-parallel in one process: a replica per GPU, each with the workload's
batch, gradients averaged on the first GPU after every step and copied back (peer copies, so it
needs no NCCL, which MPS clients cannot always use).

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
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--log", help="also append the JSON line to this file")
    parser.add_argument("--workloads", default=os.path.join(HERE, "workloads.json"))
    args = parser.parse_args()
    w = load(args.workload, args.workloads)

    import torch
    import colo_profile

    shape = tuple(int(x) for x in w["input_shape"].split(",")) if "input_shape" in w else None
    spec = colo_profile.ModelSpec(w["target"], input_shape=shape, seq_len=w.get("seq_len"))
    devices = [torch.device("cuda", i) for i in range(args.gpus)]
    models = [spec.build().to(d).train() for d in devices]
    for replica in models[1:]:  # every replica starts from the first one's weights
        replica.load_state_dict(models[0].state_dict())
    opts = [colo_profile.make_optimizer(w["optimizer"], m.parameters()) for m in models]
    params = [[p for p in m.parameters() if p.requires_grad] for m in models]

    def synchronize():
        for d in devices:
            torch.cuda.synchronize(d)

    def step():
        outputs = []
        for d, model in zip(devices, models):  # kernels are queued on every GPU before any waits
            inputs = spec.make_batch(w["batch"], d)
            outputs.append(model(**inputs) if isinstance(inputs, dict) else model(inputs))
            colo_profile.compute_loss(outputs[-1], w["batch"]).backward()
        if len(devices) > 1:
            for group in zip(*params):
                first = group[0].grad
                for other in group[1:]:
                    first.add_(other.grad.to(first.device, non_blocking=True))
                first.mul_(1.0 / len(group))
                for other in group[1:]:
                    other.grad.copy_(first, non_blocking=True)
        for opt in opts:
            opt.step()
            opt.zero_grad(set_to_none=True)
        return outputs

    times = []
    started = time.time()
    startup_s = started - process_start_time()
    i = 0
    # Each step's outputs stay referenced until the next step returns, as in colo-profile's
    # training loop and so in its trace. Dropped as step() returned, they left every GPU's peak
    # lower than profiled by the outputs (GPT-2 at batch 16: its logits and attention cache, 2.10
    # GiB, so 16.9 GiB reserved against the 20.0 its trace replays to).
    kept = None
    while True:
        synchronize()
        t0 = time.perf_counter()
        kept = step()
        synchronize()
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
    del kept
    ordered = sorted(times)
    line = json.dumps({
        "workload": w["name"], "gpus": args.gpus, "iters": len(times),
        "startup_s": round(startup_s, 3), "wall_s": round(time.time() - started, 3),
        "median_iter_ms": round(1000 * ordered[len(ordered) // 2], 3),
        "mean_iter_ms": round(1000 * sum(times) / len(times), 3),
        "max_reserved_bytes": max(torch.cuda.max_memory_reserved(d) for d in devices),
        "pid": os.getpid(), "job": os.environ.get("COLO_JOB_ID"),
        "attempt": os.environ.get("COLO_ATTEMPT"),
        "mps_threads": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
    })
    print(line, flush=True)
    if args.log:
        with open(args.log, "a") as f:  # one short append per job: whole lines even when jobs overlap
            f.write(line + "\n")


def process_start_time():
    """When this process started (the wall clock), from /proc: the job's start-up includes the
    interpreter, the imports and building the model."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
