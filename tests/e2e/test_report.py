#!/usr/bin/env python3
"""colod's history and `colo report` through the real binaries with fake GPUs (README, "Reports
of real runs"): every GPU's samples and every job's memory and GPUs recorded, kept across a
restart, missing values left missing; the report as HTML, CSV and the simulator's JSON shape,
which `colo sim --compare-with` puts beside a simulation."""

import csv
import json
import os
import sqlite3
import time

import harness
from harness import wait_until

GIB = 1 << 30

# Uses 1 GiB on its GPU at SM activity $2 for $1 seconds (the fake GPUs read the files).
COMPUTE = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
echo "$gpu 1073741824" > "$3/$$"
echo "$2" > "$3/smact-$gpu"
sleep "$1"
rm -f "$3/smact-$gpu" "$3/$$"
"""


class ReportTest(harness.OneColodTest):
    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.work = self.mkdir("work")
        self.gpu_dir = self.mkdir("fake-gpus", mode=0o777)
        self.write(os.path.join(self.bin, "compute"), COMPUTE, 0o755)
        self.config = {"history": {"flush_interval": "0.5s"}}
        self.daemon = self.colod(extra_args=["--fake-gpu-dir", self.gpu_dir], config=self.config)

    def run_jobs(self):
        """Two jobs, one per GPU, that use memory and compute; both succeed."""
        jobs = [self.submit("--mem", "2GiB", "--share", "exclusive", "--name", f"work-{i}", "--",
                            "compute", "1.5", "0.6", self.gpu_dir) for i in range(2)]
        for job in jobs:
            self.assert_succeeded(job)
        return jobs

    def report_json(self, *args):
        return json.loads(self.colo_ok("report", "--json", *args).stdout)

    def test_records_samples_jobs_and_queue_and_keeps_them_across_a_restart(self):
        jobs = self.run_jobs()
        db = os.path.join(self.daemon.state_dir, "history.db")
        # The writer flushes every 0.5 s: the jobs' memory appears in the file.
        def recorded():
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                return c.execute("SELECT count(DISTINCT job) FROM job_samples").fetchone()[0] >= 2
        wait_until(recorded, 10, "both jobs' memory in history.db")
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            gpus = c.execute("SELECT count(*), count(DISTINCT gpu), max(smact), max(power), "
                             "count(drama), count(*) - count(memory_used) FROM gpu_samples"
                             ).fetchone()
            peak = c.execute("SELECT max(memory) FROM job_samples").fetchone()[0]
            queue = c.execute("SELECT max(running) FROM queue_samples").fetchone()[0]
            mode = os.stat(db).st_mode & 0o777
        self.assertGreater(gpus[0], 10)
        self.assertEqual(gpus[1], 2)
        self.assertAlmostEqual(gpus[2], 0.6, places=3)
        self.assertGreater(gpus[3], 71)  # the fake GPUs draw 71 W idle, more computing
        # The fake GPUs report no DRAM activity: never stored as a number (NULL, not -1).
        self.assertEqual(gpus[4], 0)
        self.assertEqual(gpus[5], 0, "every fake GPU sample has its memory")
        self.assertGreaterEqual(peak, GIB)
        self.assertGreaterEqual(queue, 1)
        self.assertEqual(mode, 0o600)

        report = self.report_json()
        [run] = report["runs"]
        self.assertTrue(run["policy"].startswith("colod: worst-fit"), run["policy"])
        by_id = {j["id"]: j for j in run["job_results"]}
        for job in jobs:
            self.assertEqual(by_id[job]["state"], "succeeded")
            self.assertGreaterEqual(by_id[job]["start_s"], by_id[job]["submit_s"])
            self.assertGreater(by_id[job]["end_s"], by_id[job]["start_s"] + 1)
        self.assertEqual((run["jobs"], run["succeeded"], run["oom_crashes"]), (2, 2, 0))
        self.assertGreater(run["mean_smact"], 0)
        self.assertGreater(run["energy_mj"], 0)

        # Restarted, colod still has the run.
        self.daemon.stop()
        self.daemon.start()
        again = self.report_json()["runs"][0]
        self.assertTrue({j["id"] for j in again["job_results"]} >= set(jobs))

        # A range before the jobs holds none of them.
        early = self.report_json("--until", str(int(time.time()) - 3600))["runs"][0]
        self.assertEqual(early["jobs"], 0)
        bad = self.colo("report", "--since", "yesterday-ish")
        self.assertEqual(bad.returncode, 2, "a usage error, as for every colo command")
        self.assertIn("--since", bad.stderr)
        bad = json.loads(self.colo("report", "--json", "--since", "yesterday-ish").stdout)
        self.assertEqual(bad["error"]["code"], "invalid_argument")

    def test_html_csv_and_compare_with(self):
        jobs = self.run_jobs()
        time.sleep(1)  # one flush after the jobs ended
        html = os.path.join(self.tmp, "out", "run.html")
        self.colo_ok("report", "-o", html)
        with open(html) as f:
            text = f.read()
        self.assertIn("Chart.js v3", text)
        data = json.loads(text.split('<script id="report-data" type="application/json">')[1]
                          .split("</script>")[0])
        self.assertEqual(len(data["gpus"]), 2)
        self.assertTrue(any(p[2] and p[2] > 50 for g in data["gpus"] for p in g["points"]),
                        "SMACT of the computing GPUs")
        self.assertEqual({s[6].split()[0] for s in data["segments"]}, {str(j) for j in jobs})
        self.assertTrue(all(g["max_watts"] < 700 for g in data["gpus"]),
                        "the fake GPU's own power range")
        # Each GPU's memory by job: the job that ran there, at its 1 GiB.
        for gpu in data["gpus"]:
            [job] = gpu["memory"]["jobs"]
            self.assertAlmostEqual(max(job["gib"]), 1.0, places=2)

        csv_dir = os.path.join(self.tmp, "series")
        self.colo_ok("report", "--csv", csv_dir)
        with open(os.path.join(csv_dir, "gpus.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertGreater(len(rows), 10)
        self.assertEqual({r["drama"] for r in rows}, {""}, "missing stays an empty field")
        self.assertTrue(all(r["smact"] != "" for r in rows))
        with open(os.path.join(csv_dir, "jobs.csv")) as f:
            self.assertEqual({int(r["job"]) for r in csv.DictReader(f)}, set(jobs))
        for name in ("job_memory.csv", "queue.csv"):
            with open(os.path.join(csv_dir, name)) as f:
                self.assertGreater(len(f.readlines()), 1, name)

        # The README's forms: a summary table; a duration ago; local calendar times.
        table = self.colo_ok("report").stdout
        self.assertIn("policy worst-fit", table)
        self.assertIn(": 2 jobs, ", table)
        user = self.show(jobs[0], daemon=self.daemon)["user"]
        row = next(line for line in table.splitlines() if line.startswith(user + " "))
        self.assertEqual(row.split()[1:3], ["2", "2"])  # jobs, completed
        self.assertRegex(table, r"\n  0 Fake GPU +\d+% ")
        recent = self.report_json("--since", "2h")["runs"][0]
        self.assertEqual(recent["jobs"], 2)
        day = time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() - 86400))
        later = time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() + 3600))
        self.assertEqual(self.report_json("--since", day, "--until", later)["runs"][0]["jobs"], 2)

        run_json = os.path.join(self.tmp, "run.json")
        self.colo_ok("report", "-o", run_json)
        compare = os.path.join(self.tmp, "compare.html")
        out = self.colo_ok("sim", "--trace", "synthetic", "--jobs", "20", "--server", "h100x2",
                           "--policy", "worst-fit", "--compare-with", run_json, "--report",
                           compare).stdout
        self.assertIn("colod: worst-fit", out)
        self.assertIn("worst-fit", out.split("colod:")[0])
        bad = self.colo("sim", "--trace", "synthetic", "--jobs", "5", "--policy", "worst-fit",
                        "--compare-with", html)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--compare-with", bad.stderr)

    def test_the_summary_reads_as_written(self):
        """The policy line gives sizes as a spec writes them (margin=2GiB, not bytes), and a
        failed job's notable event says how it failed once."""
        job = self.submit("--", "sh", "-c", "echo broken >&2; exit 3")
        self.assertEqual(self.wait_state(job, {"failed"})["state"], "failed")
        time.sleep(1)  # one flush after the job ended
        table = self.colo_ok("report").stdout
        self.assertIn("policy worst-fit:margin=2GiB,reserve=0B,", table)
        [event] = [line for line in table.splitlines() if f" job {job} " in line]
        self.assertRegex(event, rf" job {job} \(\S+\) failed: exit code 3\b")
        self.assertEqual(event.count("failed"), 1, event)

    def test_history_off(self):
        self.daemon.stop()
        d = self.colod(config={"history": {"enabled": False}}, state_dir=self.daemon.state_dir,
                       socket_path=self.daemon.socket)
        result = self.colo("report", "--json", daemon=d)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("keeps no history", result.stderr)


if __name__ == "__main__":
    harness.main()
