#!/usr/bin/env python3
"""Memory plans through the real binaries, on fake GPUs whose per-process memory the jobs write
(colod --fake-gpu-dir): the frameworks' settings a job starts with and the user's own kept, a
job above its plan under plain sharing (event, `colo show` line, metric, raised need), and an
out-of-memory crash with PyTorch's figures that recovers in one step; and a job's solo SM
activity, predicted from its profile and then learned from a run alone on a GPU.
"""

import json
import os
import re
import shutil

import harness
from harness import wait_until

GIB = 1 << 30

PRINT_ENV = """#!/bin/sh
env | grep -E '^(XLA_PYTHON_CLIENT_|TF_FORCE_GPU_ALLOW_GROWTH|PYTORCH_CUDA_ALLOC_CONF|COLO_GPU_MEMORY)' | sort
"""

# Uses $2 bytes on its GPU (written to the fake GPUs' directory $1) until $3 exists.
USE_MEMORY = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
echo "$gpu $2" > "$1/$$"
i=0
while [ ! -e "$3" ]; do
  i=$((i + 1))
  if [ $i -gt 1200 ]; then echo "gave up waiting for $3" >&2; exit 3; fi
  sleep 0.05
done
"""

# Needs $2 bytes: under a smaller limit it fills its limit (less 128 MiB) and fails as PyTorch
# reports it, with the figures PyTorch prints; with enough it succeeds.
NEEDS = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
need=$2
plan=${COLO_GPU_MEMORY:-0}
if [ "$plan" -lt "$need" ]; then
  used=$((plan - 134217728))
  echo "$gpu $used" > "$1/$$"
  sleep 1
  gib=$(awk "BEGIN { printf \\"%.2f\\", $used / 1073741824 }")
  cat >&2 <<EOF2
Traceback (most recent call last):
  File "train.py", line 40, in <module>
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 6.44 MiB is free. Including non-PyTorch memory, this process has $gib GiB memory in use. Of the allocated memory 2.41 GiB is allocated by PyTorch, and 33.59 MiB is reserved by PyTorch but unallocated.
EOF2
  exit 1
fi
echo "$gpu $need" > "$1/$$"
sleep 1
echo "attempt $COLO_ATTEMPT ok with $plan"
"""


# Computes at SM activity $3 on its GPU (and uses 1 GiB) for $2 seconds.
COMPUTE = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
echo "$gpu 1073741824" > "$1/$$"
echo "$3" > "$1/smact-$gpu"
sleep "$2"
rm -f "$1/smact-$gpu"
"""


class MemoryTest(harness.OneColodTest):
    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.work = self.mkdir("work")
        self.gpu_dir = self.mkdir("fake-gpus", mode=0o777)
        for name, text in (("print-env", PRINT_ENV), ("use-memory", USE_MEMORY),
                           ("needs", NEEDS), ("compute", COMPUTE)):
            self.write(os.path.join(self.bin, name), text, 0o755)
        self.port = harness.free_loopback_port()
        self.daemon = self.colod(extra_args=["--fake-gpu-dir", self.gpu_dir],
                                 config={"metrics": {"enabled": True, "port": self.port}})

    def events(self, detail, kind):
        return [e["detail"] for e in detail["events"] if e["kind"] == kind]

    def test_jobs_start_with_the_frameworks_sharing_settings(self):
        """A plain job of 2 GiB: JAX preallocates its plan (less the context) and TensorFlow
        grows; COLO_GPU_MEMORY is its plan; `colo show` says what colod set."""
        job = self.submit("--mem", "2GiB", "--share", "plain", "--", "print-env")
        detail = self.assert_succeeded(job)
        out = self.colo_ok("logs", job).stdout
        self.assertIn("TF_FORCE_GPU_ALLOW_GROWTH=true\n", out)
        self.assertIn(f"COLO_GPU_MEMORY={2 * GIB}\n", out)
        fraction = re.search(r"^XLA_PYTHON_CLIENT_MEM_FRACTION=(0\.\d{3})$", out, re.M)
        self.assertIsNotNone(fraction, out)
        self.assertLessEqual(float(fraction.group(1)) * 80 * GIB, 2 * GIB)
        self.assertNotIn("XLA_PYTHON_CLIENT_PREALLOCATE", out)
        self.assertNotIn("PYTORCH_CUDA_ALLOC_CONF", out, "no plan was made for expandable segments")
        env_events = self.events(detail, "env")
        self.assertEqual(len(env_events), 1, detail["events"])
        self.assertIn("TF_FORCE_GPU_ALLOW_GROWTH=true", env_events[0])

    def test_the_users_own_settings_are_kept(self):
        """A job submitted with its own JAX and TensorFlow settings keeps them."""
        job = self.submit("--mem", "2GiB", "--share", "plain", "--", "print-env",
                          extra_env={"XLA_PYTHON_CLIENT_PREALLOCATE": "true",
                                     "TF_FORCE_GPU_ALLOW_GROWTH": "false"})
        detail = self.assert_succeeded(job)
        out = self.colo_ok("logs", job).stdout
        self.assertIn("XLA_PYTHON_CLIENT_PREALLOCATE=true\n", out)
        self.assertIn("TF_FORCE_GPU_ALLOW_GROWTH=false\n", out)
        self.assertNotIn("XLA_PYTHON_CLIENT_MEM_FRACTION", out)
        env_events = self.events(detail, "env")
        self.assertEqual(len(env_events), 1, detail["events"])
        self.assertIn("kept: XLA_PYTHON_CLIENT_PREALLOCATE TF_FORCE_GPU_ALLOW_GROWTH",
                      env_events[0])

    def test_solo_sm_activity_is_predicted_then_learned(self):
        """A profiled job plans with the SM activity the client predicted; once a run of its model
        computed alone at 0.35, later jobs of the model plan with that (event, `colo show`)."""
        src = os.path.join(harness.DATA_DIR, "estimate", "tv-resnet18-b32-adam")
        shutil.copy(src + ".json", os.path.join(self.work, "model.json"))
        shutil.copy(src + ".b32.trace", os.path.join(self.work, "tv-resnet18-b32-adam.b32.trace"))
        profiled = ("--estimate-from", "model.json", "--gpu-model", "H100")
        first = self.submit(*profiled, "--", "compute", self.gpu_dir, "4", "0.35")
        detail = self.assert_succeeded(first)
        predicted = detail["estimate"]["predicted_smact"]
        self.assertGreater(abs(predicted - 0.35), 0.1)
        self.assertAlmostEqual(detail["attempt_list"][0]["solo_smact"], 0.35, places=2)
        second = self.submit(*profiled, "--", "compute", self.gpu_dir, "0", "0.35")
        detail = self.assert_succeeded(second)
        self.assertAlmostEqual(detail["smact"], 0.35, places=2)
        self.assertEqual(detail["estimate"]["history"]["solo_smact"], detail["smact"])
        self.assertTrue(self.events(detail, "smact"), detail["events"])
        self.assertRegex(self.colo_ok("show", second).stdout,
                         r"Smact=0\.35 \(learned from earlier runs alone on a GPU\)")

    def test_submit_and_estimate_say_which_estimate_they_plan_with_and_why(self):
        """`colo submit --estimate-from` and `colo estimate` warn when the estimate is not the trace
        replay with the job's own GPU's calibration: another GPU's calibration (none named, or the
        named one not calibrated), or a fallback to GPUMemNet when the trace cannot answer, with
        the reason and what would let it; nothing with the GPU's own calibration."""
        src = os.path.join(harness.DATA_DIR, "estimate", "tv-resnet18-b32-adam")
        shutil.copy(src + ".json", os.path.join(self.work, "model.json"))
        shutil.copy(src + ".b32.trace", os.path.join(self.work, "tv-resnet18-b32-adam.b32.trace"))
        own = self.colo_ok("submit", "--estimate-from", "model.json", "--gpu-model", "H100", "--", "true")
        self.assertNotIn("warning", own.stderr)
        self.assertRegex(own.stderr, r"colo: trace estimates [\d.]+ GiB")
        unnamed = self.colo_ok("submit", "--estimate-from", "model.json", "--", "true")
        self.assertIn("colo: warning: the trace estimate: no GPU named: made with the NVIDIA H100 80GB "
                      "HBM3's calibration", unnamed.stderr)
        other = self.colo_ok("submit", "--estimate-from", "model.json", "--gpu-model", "A100", "--", "true")
        self.assertIn("colo: warning: the trace estimate: no calibration for GPU 'A100'", other.stderr)
        self.assertIn("run colo-calibrate on it: made with the NVIDIA H100 80GB HBM3's calibration instead",
                      other.stderr)
        job = int(other.stdout.split()[-1])
        self.assertEqual(self.assert_succeeded(job)["estimate"]["estimator"], "trace")
        fallback = self.colo_ok("submit", "--estimate-from", "model.json", "--gpu-model", "H100",
                                "--batch", "48", "--", "true")
        self.assertIn("colo: warning: the estimate falls back to gpumemnet", fallback.stderr)
        self.assertIn("no trace for batch 48 (recorded: 32); profile with --batch 48", fallback.stderr)
        # The same from `colo estimate`, in its JSON too; without a trace at all it says to profile.
        estimate = self.colo_ok("estimate", "model.json", "--gpu", "A100", "--json")
        self.assertIn("colo estimate: warning: the trace estimate: no calibration for GPU 'A100'", estimate.stderr)
        self.assertEqual(len(json.loads(estimate.stdout)["warnings"]), 1)
        self.assertEqual(json.loads(self.colo_ok("estimate", "model.json", "--gpu", "H200", "--json").stdout)
                         ["warnings"], [])
        summary = os.path.join(harness.DATA_DIR, "estimate", "resnet18.torchsummary.txt")
        plain = self.colo_ok("estimate", summary, "--batch", "32")
        self.assertIn("the trace estimator could not answer (the summary has no allocation trace", plain.stderr)
        self.assertIn("profile the job with colo-profile", plain.stderr)

    def test_a_job_above_its_plan_under_plain_sharing(self):
        """Declared at 1 GiB, it uses 3 GiB sharing plainly: an over-plan event, an OverPlan
        line in `colo show`, the metric for its GPU, and a need raised above its use."""
        release = os.path.join(self.work, "release")
        job = self.submit("--mem", "1GiB", "--share", "plain", "--", "use-memory", self.gpu_dir,
                          3 * GIB, release)

        def over_plan():
            detail = self.show(job)
            return detail if self.events(detail, "over-plan") else None

        detail = wait_until(over_plan, 20, "the over-plan event")
        self.assertIn("above its plan of 1.0 GiB", self.events(detail, "over-plan")[0])
        self.assertGreaterEqual(detail["need"], 3 * GIB, "the need was not raised")
        self.assertTrue(detail["attempt_list"][0]["over_plan"])
        text = self.colo_ok("show", job).stdout
        self.assertRegex(text, r"OverPlan=peak 3\.0+ GiB > plan 1\.0+ GiB")
        gpu = int(detail["attempt_list"][0]["gpus"][0])
        metrics = harness.http_get(self.port, "/metrics")[1]
        self.assertRegex(metrics, rf'colo_jobs_over_plan_total{{gpu="{gpu}",UUID="[^"]+",'
                                  rf'modelName="[^"]+",Hostname="[^"]*"}} 1\n')
        self.write(release, "")
        detail = self.assert_succeeded(job)
        self.assertEqual(len(self.events(detail, "over-plan")), 1, "told once per attempt")
        self.assertGreaterEqual(detail["attempt_list"][0]["peak"], 3 * GIB)

    def test_out_of_memory_with_pytorchs_figures_recovers_in_one_step(self):
        """Declared at 3 GiB, it needs 7.1 GiB: its first attempt fails at its limit with
        PyTorch's figures, and its second has enough."""
        job = self.submit("--mem", "3GiB", "--share", "plain", "--", "needs", self.gpu_dir,
                          71 * GIB // 10)
        detail = self.assert_succeeded(job, deadline=60)
        self.assertEqual([a["exit_kind"] for a in detail["attempt_list"]],
                         ["out-of-memory", "success"])
        need = self.events(detail, "need")
        self.assertEqual(len(need), 1, detail["events"])
        self.assertRegex(need[0], r"^3\.0 GiB -> 7\.\d GiB: PyTorch in use 2\.\d GiB \+ tried "
                                  r"20 MiB at the 3\.0 GiB limit: limit-bound")
        # The attempt's error is PyTorch's whole line, every figure in it, as `colo show` gives it.
        error = detail["attempt_list"][0]["detail"]
        self.assertTrue(error.startswith("torch.OutOfMemoryError: CUDA out of memory."), error)
        self.assertRegex(error, r"this process has 2\.\d\d GiB memory in use\. Of the allocated "
                                r"memory 2\.41 GiB is allocated by PyTorch, and 33\.59 MiB is "
                                r"reserved by PyTorch but unallocated\.$")
        self.assertIn("attempt 2 ok", self.colo_ok("logs", job).stdout)

    def test_a_job_far_above_its_limit_recovers_in_two_attempts(self):
        """Declared at 3 GiB, it needs 13.9 GiB, more than the need its crash's figures give
        (x2.4): its retry is placed with that need but runs under the room its GPU has beside a
        10 GiB job on both GPUs, and succeeds; attempt 2 sees that room in COLO_GPU_MEMORY."""
        release = os.path.join(self.work, "release")
        neighbour = self.submit("--mem", "10GiB", "--gpus", "2", "--share", "plain", "--",
                                "use-memory", self.gpu_dir, 10 * GIB, release)
        wait_until(lambda: self.show(neighbour)["state"] == "running", 20, "the 10 GiB job")
        job = self.submit("--mem", "3GiB", "--share", "plain", "--", "needs", self.gpu_dir,
                          139 * GIB // 10)
        detail = self.assert_succeeded(job, deadline=90)
        self.write(release, "")
        self.assert_succeeded(neighbour)
        attempts = detail["attempt_list"]
        self.assertEqual([a["exit_kind"] for a in attempts], ["out-of-memory", "success"])
        self.assertEqual(attempts[0]["memory_limit"], 3 * GIB)
        need = self.events(detail, "need")
        self.assertEqual(len(need), 1, detail["events"])
        planned = re.match(r"^3\.0 GiB -> (\d+\.\d) GiB: PyTorch in use 2\.\d GiB \+ tried "
                           r"20 MiB at the 3\.0 GiB limit: limit-bound", need[0])
        self.assertIsNotNone(planned, need[0])
        self.assertLess(float(planned.group(1)), 13.9, "the figures alone fall short")
        room = attempts[1]["memory_limit"]
        self.assertGreaterEqual(room, 139 * GIB // 10)
        self.assertLessEqual(room, 70 * GIB, "the 10 GiB job's reservation is not in the room")
        limit = self.events(detail, "limit")
        self.assertEqual(len(limit), 1, detail["events"])
        self.assertRegex(limit[0], rf"^attempt 2 may use the \d+\.\d GiB its GPU has free, "
                                   rf"above its plan of {planned.group(1)} GiB")
        self.assertIn(f"attempt 2 ok with {room}", self.colo_ok("logs", job).stdout)


if __name__ == "__main__":
    harness.main()
