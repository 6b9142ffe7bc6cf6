#!/usr/bin/env python3
"""The HTML reports in a real browser: headless Chromium loads a `colo sim --report` and a
`colo report` of a real run (fake GPUs); the page's own check must find every chart drawn and
no error (it puts the result in the title, which --dump-dom shows), and a screenshot of each is
kept in the build directory (build/artifacts/report-sim.png, report-real.png).

Skipped (77) where Chromium is not installed (Debian: chromium)."""

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


def chromium(*args, home):
    argv = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", f"--user-data-dir={home}/profile",
            "--virtual-time-budget=5000", *args]
    return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=120,
                          env={"PATH": harness.SYSTEM_PATH, "HOME": home})


class BrowserTest(harness.E2ETest):
    def check_in_browser(self, html, name):
        home = self.mkdir("browser-" + name)
        dom = chromium("--dump-dom", "file://" + html, home=home)
        title = re.search(r"<title>(.*?)</title>", dom.stdout, re.S)
        self.assertIsNotNone(title, dom.stdout[-2000:] + dom.stderr[-2000:])
        match = re.fullmatch(r"colo-report:ok:(\d+)/(\d+)", title.group(1))
        self.assertIsNotNone(match, f"the page's check failed: {title.group(1)}\n"
                                    f"{dom.stderr[-3000:]}")
        drawn, charts = int(match.group(1)), int(match.group(2))
        self.assertEqual(drawn, charts)
        self.assertGreaterEqual(charts, 12)
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
        return charts

    def test_simulation_report(self):
        html = os.path.join(self.tmp, "sim.html")
        self.colo_ok("sim", "--trace", "thesis-60", "--server", "a100x4", "--compare",
                     "exclusive,worst-fit,worst-fit:est=none", "--report", html)
        self.check_in_browser(html, "sim")

    def test_real_run_report(self):
        bin_dir = self.mkdir("bin")
        gpu_dir = self.mkdir("fake-gpus", mode=0o777)
        self.write(os.path.join(bin_dir, "compute"), COMPUTE, 0o755)
        daemon = self.colod(extra_args=["--fake-gpu-dir", gpu_dir],
                            config={"history": {"flush_interval": "0.3s"}})
        jobs = [self.submit("--mem", "4GiB", "--name", f"train-{i}", "--", "compute", "1",
                            "0.5", gpu_dir, daemon=daemon, path_prefix=bin_dir)
                for i in range(3)]
        for job in jobs:
            self.assert_succeeded(job, daemon=daemon)
        time.sleep(1)
        html = os.path.join(self.tmp, "real.html")
        self.colo_ok("report", "-o", html, daemon=daemon)
        self.check_in_browser(html, "real")


if __name__ == "__main__":
    harness.main()
