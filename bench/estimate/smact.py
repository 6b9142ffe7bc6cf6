#!/usr/bin/env python3
"""Solo SM activity of the estimator's evaluation models: each case trains alone on GPU 0 for a
few seconds while NVML's GPM reports the GPU's SM activity (SMACT) and occupancy; the truth that
colo's SMACT prediction (from a profile's FLOPs and bytes per step) is fitted to and checked on.

    smact.py --out FILE.jsonl [--cases all,heldout,user] [--warmup 3] [--seconds 5] [--budget 540]

Every case runs in this one process, one after the other (nothing else on the GPU), with the same
training loop the memory evaluation uses: synthetic batches made on the GPU, so the number is the
step's own activity, without a data loader. One line per case is appended as it finishes; a
re-run skips the cases already in FILE.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import evaluate  # noqa: E402  (its case lists, and tools/ on the path for colo_profile)
import colo_profile  # noqa: E402


class Gpm(threading.Thread):
    """GPM SM activity and occupancy of GPU 0 over one window, sampled every `interval` s."""

    def __init__(self, interval=0.25):
        super().__init__(daemon=True)
        import pynvml as n

        self.n = n
        n.nvmlInit()
        self.handle = n.nvmlDeviceGetHandleByIndex(0)
        self.interval = interval
        self.samples = []
        self.recording = threading.Event()
        self.stop = threading.Event()

    def metrics(self, first, second):
        n = self.n
        get = n.c_nvmlGpmMetricsGet_t()
        get.version = n.NVML_GPM_METRICS_GET_VERSION
        get.numMetrics = 2
        get.sample1, get.sample2 = first, second
        get.metrics[0].metricId = n.NVML_GPM_METRIC_SM_UTIL
        get.metrics[1].metricId = n.NVML_GPM_METRIC_SM_OCCUPANCY
        n.nvmlGpmMetricsGet(get)
        return get.metrics[0].value / 100, get.metrics[1].value / 100

    def run(self):
        n = self.n
        previous = n.nvmlGpmSampleAlloc()
        n.nvmlGpmSampleGet(self.handle, previous)
        while not self.stop.is_set():
            time.sleep(self.interval)
            current = n.nvmlGpmSampleAlloc()
            n.nvmlGpmSampleGet(self.handle, current)
            if self.recording.is_set():
                self.samples.append(self.metrics(previous, current)
                                    + (n.nvmlDeviceGetPowerUsage(self.handle) / 1000,))
            n.nvmlGpmSampleFree(previous)
            previous = current


def workload_of(case):
    target, batch, optimizer, amp, seq = case
    task_target, task = evaluate.split_task(target)
    if task_target.startswith("step:"):
        path, _, function = task_target[len("step:"):].rpartition(":")
        return colo_profile.workload_from_function(colo_profile.load_function(path, function), batch)
    return colo_profile.ModelSpec(task_target, seq_len=seq, task=task).workload(optimizer, amp)


def measure(case, gpm, warmup, seconds):
    import torch

    batch = case[1]
    workload = workload_of(case)
    model = workload.model.to("cuda")
    model.train()
    optimizer = workload.make_optimizer(model, None)

    def step():
        inputs = workload.batch(batch, "cuda", False)
        workload.run_step(model, inputs, batch, optimizer, "cuda")

    deadline = time.monotonic() + warmup
    while time.monotonic() < deadline:
        step()
    torch.cuda.synchronize()
    gpm.samples.clear()
    gpm.recording.set()
    steps, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        step()
        steps += 1
    torch.cuda.synchronize()
    elapsed = time.monotonic() - started
    gpm.recording.clear()
    samples = list(gpm.samples)
    del model, optimizer, workload
    gc.collect()
    torch.cuda.empty_cache()
    if not samples:
        raise RuntimeError("no GPM sample in the window")
    return {"smact": sum(s[0] for s in samples) / len(samples),
            "smocc": sum(s[1] for s in samples) / len(samples),
            "power_w": sum(s[2] for s in samples) / len(samples),
            "step_ms": 1000 * elapsed / max(1, steps), "steps": steps, "samples": len(samples)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--cases", default="all,heldout,user")
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--budget", type=float, default=540, help="stop starting cases after this")
    # A device-side assert leaves the process's CUDA context unusable for every later case.
    parser.add_argument("--skip", default="hf-roberta-b8-adam",
                        help="case ids not to run (comma-separated): hf-roberta-b8-adam asserts")
    args = parser.parse_args()
    done = set()
    if os.path.exists(args.out):
        with open(args.out) as f:
            done = {json.loads(line)["id"] for line in f if line.strip()}
    import torch

    torch.backends.cudnn.benchmark = False  # as the evaluation's runs (PyTorch's default)
    gpm = Gpm()
    gpm.start()
    stop_at = time.monotonic() + args.budget
    for which in args.cases.split(","):
        for case in evaluate.cases(which):
            cid = evaluate.case_id(*case)
            if cid in done or cid in args.skip.split(",") or time.monotonic() > stop_at:
                continue
            record = {"id": cid, "set": which, "gpu": torch.cuda.get_device_name(0)}
            try:
                record.update(measure(case, gpm, args.warmup, args.seconds))
            except Exception as error:  # one broken case must not end the run
                record["error"] = f"{type(error).__name__}: {error}"[:500]
                gc.collect()
                torch.cuda.empty_cache()
            with open(args.out, "a") as f:
                f.write(json.dumps(record) + "\n")
            print(cid, record.get("smact"), record.get("step_ms"), record.get("error", ""), flush=True)
    gpm.stop.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
