#!/usr/bin/env python3
"""The HTML reports in a real browser: headless Chromium loads a `colo sim --report` and a
`colo report` of a real run (fake GPUs, two users' jobs, an out-of-memory recovery and a time
limit); the page's own check must find every chart drawn, none crowded to a sliver of plot, and
no error (it puts the result in the title, which --dump-dom shows), and a screenshot of each is
kept in the build directory (build/artifacts/report-sim.png, report-real.png).

Skipped (77) where Chromium is not installed (Debian: chromium)."""

import json
import os
import re
import shutil
import subprocess
import time

import harness

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
if not BROWSER:
    harness.skip_file("chromium is not installed (scripts/install-deps.sh installs it)")
ARTIFACTS = os.path.join(os.path.dirname(harness.BIN_DIR), "artifacts")

COMPUTE = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
echo "$gpu 3221225472" > "$3/$$"
echo "$2" > "$3/smact-$gpu"
sleep "$1"
rm -f "$3/smact-$gpu" "$3/$$"
"""

# Runs out of GPU memory on its first attempt, as PyTorch says it; succeeds on its second.
OOM_ONCE = """#!/bin/sh
if [ "$COLO_ATTEMPT" = 1 ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB." >&2
  exit 1
fi
"""


def chromium(*args, home):
    argv = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", f"--user-data-dir={home}/profile",
            "--virtual-time-budget=5000", *args]
    return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=120,
                          env={"PATH": harness.SYSTEM_PATH, "HOME": home})


class BrowserTest(harness.E2ETest):
    def check_in_browser(self, html, name, minimum_charts):
        home = self.mkdir("browser-" + name)
        dom = chromium("--dump-dom", "file://" + html, home=home)
        title = re.search(r"<title>(.*?)</title>", dom.stdout, re.S)
        self.assertIsNotNone(title, dom.stdout[-2000:] + dom.stderr[-2000:])
        match = re.fullmatch(r"colo-report:ok:(\d+)/(\d+):(\d+)", title.group(1))
        self.assertIsNotNone(match, f"the page's check failed: {title.group(1)}\n"
                                    f"{dom.stderr[-3000:]}")
        drawn, charts, plot = map(int, match.groups())
        self.assertEqual(drawn, charts)
        self.assertGreaterEqual(charts, minimum_charts)
        # Every chart keeps a plot to read: no legend or label crowds it out.
        smallest = re.search(r'data-smallest="([^"]*)"', dom.stdout)
        self.assertGreaterEqual(plot, 100, "a chart's plot area is too small: " +
                                (smallest.group(1) if smallest else "?"))
        self.assertNotIn("Uncaught", dom.stderr)
        os.makedirs(ARTIFACTS, exist_ok=True)
        png = os.path.join(ARTIFACTS, f"report-{name}.png")
        if os.path.exists(png):
            os.remove(png)
        shot = chromium(f"--screenshot={png}", "--window-size=1280,3000", "file://" + html,
                        home=home)
        self.assertTrue(os.path.getsize(png) > 10000 if os.path.exists(png) else False,
                        shot.stderr[-2000:])
        print(f"screenshot: {png}")
        return dom.stdout

    def test_simulation_report(self):
        """make demo's report: every policy of the thesis comparison, long names and all."""
        html = os.path.join(self.tmp, "sim.html")
        self.colo_ok("sim", "--trace", "thesis-90", "--server", "a100x4", "--compare", "thesis",
                     "--report", html)
        dom = self.check_in_browser(html, "sim", 12)
        self.assertIn('class="runs"', dom)  # the runs' legend, outside the distributions

    def test_real_run_report(self):
        """A real run's report: per user (two users here), per GPU over wall-clock time, the
        notable events (an out-of-memory recovery, a time limit) and every job with its user."""
        bin_dir = self.mkdir("bin")
        work = self.mkdir("work", mode=0o777)
        gpu_dir = self.mkdir("fake-gpus", mode=0o777)
        self.write(os.path.join(bin_dir, "compute"), COMPUTE, 0o755)
        self.write(os.path.join(bin_dir, "oom-once"), OOM_ONCE, 0o755)
        daemon = self.colod(extra_args=["--fake-gpu-dir", gpu_dir],
                            config={"history": {"flush_interval": "0.3s"},
                                    "jobs": {"timeout_grace": "1s"}})
        other = harness.unprivileged_user() if harness.is_root() else None
        run = dict(daemon=daemon, path_prefix=bin_dir, cwd=work)
        jobs = [self.submit("--mem", "4GiB", "--name", f"train-{i}", "--", "compute", "1",
                            "0.5", gpu_dir, **run) for i in range(2)]
        jobs.append(self.submit("--mem", "2GiB", "--name", "sweep", "--", "compute", "1", "0.3",
                                gpu_dir, user=other, **run))
        jobs.append(self.submit("--mem", "1GiB", "--share", "plain", "--name", "retried", "--",
                                "oom-once", user=other, **run))
        timeout = self.submit("-t", "0:1", "--name", "too-long", "--", "sleep", "30", **run)
        array = self.submit("--array", "0-1", "--mem", "1GiB", "--name", "sweep", "--", "true",
                            **run)
        jobs += [array, array + 1]
        for job in jobs:
            self.assert_succeeded(job, daemon=daemon)
        self.wait_state(timeout, "timeout", daemon=daemon)
        time.sleep(1)
        html = os.path.join(self.tmp, "real.html")
        self.colo_ok("report", "-o", html, daemon=daemon)
        dom = self.check_in_browser(html, "real", 3 + 1 + 2 * 2 + 1)
        for needle in ('id="users"', 'id="gpus"', 'id="events"', 'id="jobs"',
                       f'<td class="text">{array}_1</td>',
                       ">out-of-memory<", ">timeout<", "stopped at its time limit"):
            self.assertIn(needle, dom)
        with open(html) as f:
            data = json.loads(f.read().split('<script id="report-data" type="application/json">')
                              [1].split("</script>")[0])
        self.assertGreater(data["since_ms"], (time.time() - 3600) * 1000, "wall-clock axes")
        users = {harness.current_user().name, (other or harness.current_user()).name}
        for user in users:
            self.assertIn(f"</span>{user}</td>", dom)  # a row of the per-user table

if __name__ == "__main__":
    harness.main()
