#!/usr/bin/env python3
"""colod's NVML backend, loaded as on a real GPU server (dlopen of $COLO_NVML_LIBRARY), over the
fake libnvidia-ml of the tests (tests/gpu/fake_nvml.cc): GPUs, GPM activity and a job's memory
reach `colo gpus`, the job and /metrics; the driver's process query is made only for a GPU that
runs a job; the GPM samples are allocated once per GPU, not at every sample. Needs
$COLO_FAKE_NVML (set by ctest), else skipped (77).
"""

import os
import re

import harness
from harness import wait_until

FAKE_NVML = os.environ.get("COLO_FAKE_NVML")

# Uses 3 GiB on its GPU (written to the fake GPUs' directory $1) until $2 exists.
USE_MEMORY = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
echo "$gpu 3221225472" > "$1/$$"
i=0
while [ ! -e "$2" ] && [ $i -lt 1200 ]; do i=$((i + 1)); sleep 0.05; done
"""

GIB = 1 << 30


class NvmlTest(harness.OneColodTest):
    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.work = self.mkdir("work")
        self.gpu_dir = self.mkdir("fake-gpus", mode=0o777)
        self.write(os.path.join(self.bin, "use-memory"), USE_MEMORY, 0o755)
        self.write(os.path.join(self.gpu_dir, "smact-2"), "0.25\n")
        self.counts = os.path.join(self.tmp, "nvml-calls")
        self.port = harness.free_loopback_port()
        env = {"PATH": harness.SYSTEM_PATH, "LANG": "C.UTF-8", "COLO_NVML_LIBRARY": FAKE_NVML,
               "COLO_FAKE_NVML_GPUS": "4", "COLO_FAKE_NVML_DIR": self.gpu_dir,
               "COLO_FAKE_NVML_COUNTS": self.counts}
        self.daemon = self.colod(fake_gpus=0, env=env,
                                 config={"metrics": {"enabled": True, "port": self.port}})

    def calls(self):
        """The fake driver's call counts as of its last round of samples."""
        try:
            with open(self.counts) as f:
                return {name: int(n) for name, n in (line.split() for line in f)}
        except (OSError, ValueError):
            return {}

    def rounds_after(self, rounds):
        """Waits until the fake has seen `rounds` more samples of every GPU; their counts."""
        first = wait_until(lambda: self.calls().get("memory"), 10, "a first sample")
        return wait_until(lambda: (lambda c: c if c.get("memory", 0) >= first + 4 * rounds
                                   else None)(self.calls()), 10 + rounds, f"{rounds} more samples")

    def test_gpus_jobs_and_metrics_through_nvml(self):
        # GPM's figures are rates between two samples: none before the second.
        gpus = wait_until(lambda: (lambda g: g if all(x.get("activity_source", "none") != "none"
                                                      for x in g) else None)(
            self.colo_json("gpus")["gpus"]), 10, "GPM readings")
        self.assertEqual(len(gpus), 4)
        self.assertEqual({g["name"] for g in gpus}, {"Fake NVML GPU"})
        self.assertEqual([g["activity_source"] for g in gpus], ["gpm"] * 4)
        self.assertEqual(gpus[2]["smact"], 0.25)
        self.assertEqual(gpus[0]["memory_total"], 80 * GIB)

        # Idle: no process query at all; two GPM buffers per GPU, however many samples.
        idle = self.rounds_after(3)
        self.assertEqual(idle.get("processes", 0), 0, idle)
        self.assertEqual(idle.get("gpm_sample_alloc"), 8, idle)
        self.assertEqual(idle.get("gpm_samples_live"), 8, idle)
        self.assertGreaterEqual(idle.get("gpm_metrics", 0), 4 * 3, idle)
        # The board's energy counter is read at the first sample and then every 10 s, not at
        # every sample (gpu/energy_counter.h); the power samples carry it in between.
        self.assertGreaterEqual(idle["memory"], 4 * 4, idle)
        self.assertIn(idle.get("energy"), (4, 8), idle)
        totals = [[g.get("energy_joules", -1) for g in self.colo_json("gpus")["gpus"]]]
        self.rounds_after(2)
        totals.append([g.get("energy_joules", -1) for g in self.colo_json("gpus")["gpus"]])
        for before, after in zip(*totals):
            self.assertGreater(before, 0, totals)
            self.assertGreaterEqual(after, before, totals)

        done = os.path.join(self.tmp, "done")
        job = self.submit("--mem", "4GiB", "--", "use-memory", self.gpu_dir, done)
        running = self.wait_state(job, "running")
        gpu = running["attempt_list"][0]["gpus"][0]
        used = wait_until(lambda: (lambda m: m if m and m > 0 else None)(
            self.show(job)["attempt_list"][0].get("peak")), 15, "the job's memory")
        self.assertEqual(used, 3 * GIB)
        # The job's GPU has its processes read; the others still do not.
        busy = self.rounds_after(2)
        self.assertGreater(busy.get(f"processes.{gpu}", 0), 0, busy)
        for other in set(range(4)) - {gpu}:
            self.assertEqual(busy.get(f"processes.{other}", 0), 0, busy)
        self.assertEqual(busy.get("gpm_sample_alloc"), 8, busy)

        status, body = harness.http_get(self.port, "/metrics")
        self.assertEqual(status, "HTTP/1.1 200 OK")
        self.assertRegex(body, r'(?m)^colo_gpu_backend_calls_total\{call="processes"\} [1-9]')
        self.assertRegex(body, r'(?m)^colo_gpu_backend_cpu_seconds_total\{call="gpm_sample"\} ')
        self.assertRegex(body, r"(?m)^process_cpu_seconds_total [0-9.e+-]+$")
        calls = {m.group(1): int(float(m.group(2))) for m in re.finditer(
            r'(?m)^colo_gpu_backend_calls_total\{call="([a-z_]+)"\} (\S+)$', body)}
        self.assertGreaterEqual(calls["memory"], busy["memory"])

        with open(done, "w"):
            pass
        self.wait_state(job, "succeeded")


if __name__ == "__main__":
    if not FAKE_NVML or not os.path.exists(FAKE_NVML):
        harness.skip_file("no fake libnvidia-ml ($COLO_FAKE_NVML)")
    harness.main()
