#!/usr/bin/env python3
"""Solo profiles of the real-trace workloads on this GPU: each job alone for a while, with its
iteration time, GPM SM activity and occupancy, power, energy and peak per-process memory measured
through NVML; and colo-profile's summary and allocation trace of each, for colo's estimator.
These are the simulator's workload catalogue for this GPU and the basis of the trace's durations.

    profile_solo.py --out DIR [--seconds 20] [--only NAME,...]

Writes DIR/solo.json (one record per workload) and DIR/profiles/NAME.json (+ traces).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")


class Sampler(threading.Thread):
    """Every `interval` s, per GPU: GPM SM activity and occupancy, power, the energy counter and
    memory in use; per-process memory every 20 ms. A sample's top-level fields are the GPUs' mean
    SMACT/SMOCC and their summed power and energy; `gpus` holds each GPU's own."""

    def __init__(self, interval=0.5, indices=None):
        super().__init__(daemon=True)
        import pynvml as n

        self.n = n
        n.nvmlInit()
        if indices is None:
            indices = [0]
        elif indices == "all":
            indices = list(range(n.nvmlDeviceGetCount()))
        self.handles = [n.nvmlDeviceGetHandleByIndex(i) for i in indices]
        self.h = self.handles[0]
        self.interval = interval
        self.samples = []
        self.peak = {}
        self.stop = threading.Event()

    def total_energy_mj(self):
        return sum(self.n.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles)

    def process_memory(self):
        for h in self.handles:
            for p in self.n.nvmlDeviceGetComputeRunningProcesses(h):
                if p.usedGpuMemory and p.usedGpuMemory > self.peak.get(p.pid, 0):
                    self.peak[p.pid] = p.usedGpuMemory

    def gpm(self, prev, cur):
        n = self.n
        mg = n.c_nvmlGpmMetricsGet_t()
        mg.version = n.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = 2
        mg.sample1, mg.sample2 = prev, cur
        mg.metrics[0].metricId = n.NVML_GPM_METRIC_SM_UTIL
        mg.metrics[1].metricId = n.NVML_GPM_METRIC_SM_OCCUPANCY
        n.nvmlGpmMetricsGet(mg)
        return mg.metrics[0].value / 100, mg.metrics[1].value / 100

    def run(self):
        n = self.n
        prev = []
        for h in self.handles:
            prev.append(n.nvmlGpmSampleAlloc())
            n.nvmlGpmSampleGet(h, prev[-1])
        next_gpm = time.time() + self.interval
        while not self.stop.is_set():
            self.process_memory()
            time.sleep(0.02)
            if time.time() < next_gpm:
                continue
            next_gpm += self.interval
            gpus = []
            for i, h in enumerate(self.handles):
                cur = n.nvmlGpmSampleAlloc()
                n.nvmlGpmSampleGet(h, cur)
                smact, smocc = self.gpm(prev[i], cur)
                n.nvmlGpmSampleFree(prev[i])
                prev[i] = cur
                gpus.append({"smact": smact, "smocc": smocc,
                             "power_w": n.nvmlDeviceGetPowerUsage(h) / 1000,
                             "energy_mj": n.nvmlDeviceGetTotalEnergyConsumption(h),
                             "used_bytes": n.nvmlDeviceGetMemoryInfo(h).used})
            self.samples.append({"t": time.time(),
                                 "smact": sum(g["smact"] for g in gpus) / len(gpus),
                                 "smocc": sum(g["smocc"] for g in gpus) / len(gpus),
                                 "power_w": sum(g["power_w"] for g in gpus),
                                 "energy_mj": sum(g["energy_mj"] for g in gpus), "gpus": gpus})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    os.makedirs(os.path.join(args.out, "profiles"), exist_ok=True)
    with open(os.path.join(HERE, "workloads.json")) as f:
        workloads = json.load(f)["workloads"]
    if args.only:
        keep = set(args.only.split(","))
        workloads = [w for w in workloads if w["name"] in keep]

    # colo-profile for every workload, in parallel on the CPU, while the GPU runs the solo jobs.
    profiles = []
    for w in workloads:
        cmd = [sys.executable, os.path.join(TOOLS, "colo_profile.py"), w["target"],
               "--batch", str(w["batch"]), "--optimizer", w["optimizer"],
               "-o", os.path.join(args.out, "profiles", w["name"] + ".json")]
        if "input_shape" in w:
            cmd += ["--input-shape", w["input_shape"]]
        if "seq_len" in w:
            cmd += ["--seq-len", str(w["seq_len"])]
        profiles.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))

    sampler = Sampler()
    sampler.start()
    time.sleep(3)  # the idle GPU, before any job
    idle = [s["power_w"] for s in sampler.samples]
    results = []
    for w in workloads:
        time.sleep(2)  # let the previous job's power settle
        began = time.time()
        proc = subprocess.run([sys.executable, os.path.join(HERE, "job.py"), w["name"],
                               "--seconds", str(args.seconds)], capture_output=True, text=True)
        ended = time.time()
        if proc.returncode != 0:
            results.append({"workload": w["name"], "error": proc.stderr[-1500:]})
            print(w["name"], "failed", proc.stderr[-500:], flush=True)
            continue
        job = json.loads(proc.stdout.strip().splitlines()[-1])
        # Steady state: skip the first third of the run (start-up, cuDNN, warm-up).
        window = [s for s in sampler.samples if began + (ended - began) / 3 <= s["t"] <= ended]
        energy = (window[-1]["energy_mj"] - window[0]["energy_mj"]) / 1000 if len(window) > 1 else None
        record = dict(w)
        record.update({
            "median_iter_ms": job["median_iter_ms"], "iters": job["iters"], "wall_s": job["wall_s"],
            "peak_nvml_bytes": sampler.peak.get(job["pid"]),
            "max_reserved_bytes": job["max_reserved_bytes"],
            "smact": sum(s["smact"] for s in window) / max(1, len(window)),
            "smocc": sum(s["smocc"] for s in window) / max(1, len(window)),
            "power_w": sum(s["power_w"] for s in window) / max(1, len(window)),
            "steady_energy_j": energy,
            "steady_seconds": window[-1]["t"] - window[0]["t"] if len(window) > 1 else None,
        })
        results.append(record)
        print(f"{w['name']:<22} {job['median_iter_ms']:8.2f} ms/iter  SMACT {record['smact']:.2f}  "
              f"SMOCC {record['smocc']:.2f}  {record['power_w']:.0f} W  "
              f"peak {(record['peak_nvml_bytes'] or 0) / 2**30:.2f} GiB", flush=True)
    sampler.stop.set()
    for w, p in zip(workloads, profiles):
        _, err = p.communicate()
        if p.returncode != 0:
            print(f"colo-profile {w['name']} failed: {err[-400:]}", flush=True)
    with open(os.path.join(args.out, "solo.json"), "w") as f:
        json.dump({"gpu": sampler.n.nvmlDeviceGetName(sampler.h),
                   "driver": sampler.n.nvmlSystemGetDriverVersion(),
                   "idle_power_w": sum(idle) / len(idle) if idle else None,
                   "workloads": results}, f, indent=1)


if __name__ == "__main__":
    main()
