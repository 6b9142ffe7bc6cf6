#!/usr/bin/env python3
"""colod's metrics as Prometheus and Grafana take them: a real colod (fake GPUs) with jobs
running, waiting and recovered from an out-of-memory crash; its /metrics passes `promtool check
metrics`, carries dcgm-exporter's labels and leaves unknown values out; the packaged alert rules
pass `promtool check rules` and their unit tests; the packaged Grafana dashboard matches the
schema and asks only for series colod exports. Skipped (77) without promtool (Debian's
prometheus) or python3-jsonschema.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import harness
from harness import wait_until

PROMTOOL = shutil.which("promtool")
try:
    import jsonschema
except ImportError:
    jsonschema = None

PACKAGING = os.path.join(harness.SOURCE_DIR, "packaging")
HERE = os.path.join(harness.SOURCE_DIR, "tests", "metrics")

# Uses $2 bytes on its GPU (written to the fake GPUs' directory $1) until $3 exists.
USE_MEMORY = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
echo "$gpu $2" > "$1/$$"
i=0
while [ ! -e "$3" ] && [ $i -lt 1200 ]; do i=$((i + 1)); sleep 0.05; done
"""

# Fails as PyTorch does when it runs out of memory, the first time only.
OOM_ONCE = """#!/bin/sh
if [ "$COLO_ATTEMPT" = 1 ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." >&2
  exit 1
fi
"""


class MetricsTest(harness.OneColodTest):
    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.work = self.mkdir("work")
        self.gpu_dir = self.mkdir("fake-gpus", mode=0o777)
        self.write(os.path.join(self.bin, "use-memory"), USE_MEMORY, 0o755)
        self.write(os.path.join(self.bin, "oom-once"), OOM_ONCE, 0o755)
        self.port = harness.free_loopback_port()
        self.daemon = self.colod(extra_args=["--fake-gpu-dir", self.gpu_dir],
                                 config={"metrics": {"enabled": True, "port": self.port}})

    def scrape(self):
        status, body = harness.http_get(self.port, "/metrics")
        self.assertEqual(status, "HTTP/1.1 200 OK")
        return body

    def busy_server(self):
        """A job running at 30 GiB on one GPU, one waiting (needs 70 GiB on both GPUs) and one
        recovered from an out-of-memory crash; returns the metrics text and the release file."""
        release = os.path.join(self.work, "release")
        self.addCleanup(lambda: open(release, "w").close())
        recovered = self.submit("--mem", "1GiB", "--name", 'odd "name"\\n', "--", "oom-once")
        self.assert_succeeded(recovered)
        running = self.submit("--mem", "30GiB", "--", "use-memory", self.gpu_dir, 30 << 30,
                              release)
        wait_until(lambda: self.show(running)["state"] == "running", 20, "the job to run")
        waiting = self.submit("--mem", "70GiB", "--gpus", "2", "--", "true")
        body = wait_until(
            lambda: (lambda b: b if f'job="{running}"' in b and "colo_job_memory_used_bytes{" in b
                     and re.search(r"colo_job_memory_used_bytes\{[^}]*\} [1-9]", b) else None)(
                self.scrape()), 20, "the running job's memory in the metrics")
        return body, running, waiting

    def test_metrics_pass_promtool_and_carry_dcgm_exporters_labels(self):
        if not PROMTOOL:
            self.skipTest("promtool (Debian's prometheus) is not installed")
        body, running, waiting = self.busy_server()
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=body, text=True,
                               capture_output=True)
        # Its only complaint may be the one dcgm-exporter's own labels (UUID, modelName, Hostname)
        # earn, which colo keeps on purpose so that dashboards can join the two; anything else
        # (a parse error, a counter without _total, a missing HELP) fails.
        problems = [line for line in (check.stdout + check.stderr).splitlines() if line.strip()
                    and not line.endswith("label names should be written in 'snake_case' not "
                                          "'camelCase'")]
        self.assertEqual(problems, [], check.stdout + check.stderr)
        self.assertIn(check.returncode, (0, 3), "promtool: 0 clean, 3 lint findings, 1 an error")
        self.assertRegex(body, r'(?m)^colo_build_info\{version="[0-9.]+",api="1",backend="fake",'
                               r'Hostname="[^"]*"\} 1$')
        gpu = r'gpu="\d",UUID="GPU-fake-000\d",modelName="[^"]+",Hostname="[^"]*"'
        self.assertRegex(body, rf"(?m)^colo_gpu_memory_total_bytes\{{{gpu}\}} \d+")
        self.assertRegex(body, rf"(?m)^colo_gpu_free_for_placement_bytes\{{{gpu}\}} \d+")
        self.assertRegex(body, rf'(?m)^colo_job_memory_planned_bytes\{{job="{running}",'
                               rf'user="[^"]+",{gpu}\}} 32212254720$')
        self.assertRegex(body, rf'(?m)^colo_job_memory_used_bytes\{{job="{running}",'
                               rf'user="[^"]+",{gpu}\}} 32212254720$')
        self.assertRegex(body, rf'(?m)^colo_job_info\{{job="{waiting}",user="[^"]+",'
                               r'name="true",state="queued",Hostname="[^"]*"\} 1$')
        self.assertRegex(body, r'(?m)^colo_queue_oldest_wait_seconds [0-9.e+-]+$')
        self.assertRegex(body, r'(?m)^colo_oom_recoveries_total\{policy="[^"]+",'
                               r'reason="framework"\} 1$')
        self.assertRegex(body, r'(?m)^colo_job_wait_seconds_count [1-9]')
        self.assertRegex(body, r'(?m)^colo_job_completion_seconds_count [1-9]')
        self.assertNotRegex(body, r"(?m) -1$", "a missing value must be an absent series")
        # A job name is the user's: quotes and backslashes are escaped, never break a line.
        for line in body.splitlines():
            self.assertRegex(line, r'^(#.*|[a-z_]+(\{([A-Za-z_]+="([^"\\]|\\.)*",?)*\})? \S+)$')

    def test_packaged_alert_rules(self):
        if not PROMTOOL:
            self.skipTest("promtool (Debian's prometheus) is not installed")
        rules = os.path.join(PACKAGING, "prometheus", "colo-alerts.yml")
        for argv in ([PROMTOOL, "check", "rules", rules],
                     [PROMTOOL, "test", "rules", os.path.join(HERE, "alerts_test.yml")]):
            r = subprocess.run(argv, capture_output=True, text=True, cwd=HERE)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("SUCCESS", r.stdout + r.stderr)

    def test_packaged_dashboard(self):
        if jsonschema is None:
            self.skipTest("python3-jsonschema is not installed")
        with open(os.path.join(PACKAGING, "grafana", "colo-dashboard.json")) as f:
            dashboard = json.load(f)
        with open(os.path.join(HERE, "grafana-dashboard.schema.json")) as f:
            jsonschema.validate(dashboard, json.load(f))
        ids = [p["id"] for p in dashboard["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")
        body, _, _ = self.busy_server()
        exported = set(re.findall(r"(?m)^([a-z_]+)(?:\{| )", body))
        asked = set()
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                asked |= set(re.findall(r"\b(colo_[a-z_]+)", target["expr"]))
        self.assertTrue(asked, "the dashboard asks for no colo series")
        self.assertEqual(sorted(asked - exported), [], "the dashboard asks for series colod "
                                                       "does not export")


if __name__ == "__main__":
    if not PROMTOOL and jsonschema is None:
        print("neither promtool nor python3-jsonschema: skipped", file=sys.stderr)
        sys.exit(77)
    harness.main()
