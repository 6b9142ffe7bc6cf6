"""colo's Slurm habits through the real binaries: logs (-f across out-of-memory retries, --stderr,
--both, the job's exit status), queue and history columns and --format, the state legend,
machine-readable errors and exit codes, colod --check-config and SIGHUP reload."""

import json
import os
import select
import signal
import subprocess
import unicodedata

import harness
from harness import wait_until

# Fails as PyTorch does on its first attempt (an out-of-memory error), succeeds on its second.
OOM_ONCE = """#!/bin/sh
echo "attempt $COLO_ATTEMPT out"
if [ "$COLO_ATTEMPT" = 1 ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB." >&2
  exit 1
fi
echo "attempt $COLO_ATTEMPT done"
"""

# Runs until the file $1 exists.
WAIT_FOR = """#!/bin/sh
while [ ! -e "$1" ]; do sleep 0.05; done
"""


class CliTest(harness.OneColodTest):
    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.work = self.mkdir("work", mode=0o777)
        self.write(os.path.join(self.bin, "oom-once"), OOM_ONCE, 0o755)
        self.write(os.path.join(self.bin, "wait-for"), WAIT_FOR, 0o755)
        self.daemon = self.colod()

    def finished(self, job):
        return self.wait_state(job, {"succeeded", "failed", "cancelled"})

    # --- naming jobs ---

    def test_naming_a_few_jobs_asks_for_those_not_for_every_live_job(self):
        """`colo explain`, `colo gpus` and `colo hold` print a task of an array as ARRAY_TASK,
        which they learn from the queue: for a few jobs, the queue's page at each of them, not
        every page of every live job (1,500 waiting here: three pages of 500)."""
        release = os.path.join(self.work, "release")
        running = self.submit("--share", "exclusive", "--", "wait-for", release)
        self.wait_state(running, "running")
        self.submit("--gpus", "2", "--", "true")  # waits: the head, ahead of the arrays
        first = [self.submit("--array", "0-499", "--", "true") for _ in range(3)][0]
        proxy = harness.ReplyDroppingProxy(self.daemon.socket, os.path.join(self.tmp, "proxy"),
                                           drop=0)
        self.addCleanup(proxy.close)
        via_proxy = self.client_env(socket_path=proxy.path, path_prefix=self.bin)
        task = first + 7
        for args, name in [(("explain", task), f"{first}_7"), (("gpus",), str(running)),
                           (("hold", task), f"{first}_7")]:
            proxy.ops.clear()
            r = self.colo_ok(*args, env=via_proxy)
            self.assertIn(name, r.stdout, args)
            self.assertLessEqual(proxy.ops["queue"], 1, (args, dict(proxy.ops)))
        self.write(release, "")

    # --- colo logs ---

    def test_logs_follow_waits_for_the_job_and_follows_its_retries(self):
        """`colo logs -f` on a waiting job waits, prints each attempt's output (a header before
        the retry's) and exits 0 when the job succeeds."""
        release = os.path.join(self.work, "release")
        blocker = self.submit("--gpus", "2", "--share", "exclusive", "--", "wait-for", release)
        self.wait_state(blocker, "running")
        job = self.submit("--mem", "1GiB", "--share", "plain", "--", "oom-once")
        follow = subprocess.Popen([harness.COLO, "logs", "-f", str(job)],
                                  env=self.client_env(socket_path=self.daemon.socket,
                                                      path_prefix=self.bin),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: self.show(job)["state"] == "queued", 10, "the job to wait")
            self.assertIsNone(follow.poll(), "logs -f returned before the job started")
            # It has looked and says it waits before the job may start (a slow client could
            # otherwise look only once the retry runs).
            ready, _, _ = select.select([follow.stderr], [], [], harness.CLIENT_DEADLINE)
            self.assertTrue(ready, "logs -f said nothing while the job waited")
            said = follow.stderr.readline()
            self.write(release, "")
            out, err = follow.communicate(timeout=60)
            err = said + err
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
        self.assertEqual(follow.returncode, 0, err)
        self.assertEqual(out, "attempt 1 out\nattempt 2 out\nattempt 2 done\n")
        self.assertIn("has not started yet; waiting", err)
        # The retry's output comes after its header. (The first attempt has one too only when
        # the retry had begun by the time colo looked: the first attempt fails at once.)
        self.assertIn(f"==> job {job} attempt 2 <==", err)
        self.assertNotIn(f"==> job {job} attempt 3 <==", err)
        # Each attempt on its own; the latest by default.
        self.assertEqual(self.colo_ok("logs", job, "--attempt", 1).stdout, "attempt 1 out\n")
        self.assertIn("CUDA out of memory", self.colo_ok("logs", job, "--attempt", 1,
                                                         "--stderr").stdout)
        self.assertEqual(self.colo_ok("logs", job).stdout, "attempt 2 out\nattempt 2 done\n")
        missing = self.colo("logs", job, "--attempt", 3)
        self.assertEqual(missing.returncode, 1)
        self.assertIn("has no attempt 3", missing.stderr)

    def test_logs_streams_and_the_jobs_status(self):
        """stdout by default, --stderr, --both (each to its own stream); with or without -f colo
        logs exits 1 for a job that failed, saying so last; --stderr with --both is a usage
        error."""
        job = self.submit("--", "sh", "-c", "echo out; echo err >&2; exit 3")
        self.assertEqual(self.finished(job)["state"], "failed")
        failed = f"colo: job {job} failed\n"
        out = self.colo("logs", job)
        self.assertEqual((out.returncode, out.stdout, out.stderr), (1, "out\n", failed))
        err = self.colo("logs", job, "--stderr")
        self.assertEqual((err.returncode, err.stdout), (1, "err\n"))
        both = self.colo("logs", job, "--both")
        self.assertEqual((both.returncode, both.stdout, both.stderr), (1, "out\n", "err\n" + failed))
        follow = self.colo("logs", "-f", job)
        self.assertEqual((follow.returncode, follow.stdout), (1, "out\n"))
        self.assertIn(f"job {job} failed", follow.stderr)
        self.assertEqual(self.colo("logs", job, "--stderr", "--both").returncode, 2)
        ok = self.submit("--", "sh", "-c", "echo fine")
        self.finished(ok)
        self.assertEqual(self.colo("logs", "-f", ok).returncode, 0)

    def test_logs_of_a_job_that_hit_its_time_limit(self):
        """`colo logs -f` of a job that runs into its --time returns when the job ends (also
        when it was following the job while it ran), and `colo logs`, with or without -f,
        exits 1 saying the job timed out."""
        job = self.submit("-t", "0:2", "--", "sh", "-c", "echo begun; exec sleep 60")
        self.wait_state(job, "running")
        follow = subprocess.Popen([harness.COLO, "logs", "-f", str(job)],
                                  env=self.client_env(socket_path=self.daemon.socket,
                                                      path_prefix=self.bin),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = follow.communicate(timeout=60)
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
        self.assertEqual((follow.returncode, out), (1, "begun\n"), err)
        self.assertIn(f"colo: job {job} timeout", err)
        self.assertEqual(self.show(job)["state"], "timeout")
        for args in (("logs", job), ("logs", "-f", job)):
            r = self.colo(*args, timeout=20)
            self.assertEqual((r.returncode, r.stdout, r.stderr),
                             (1, "begun\n", f"colo: job {job} timeout\n"), args)

    def test_logs_does_not_follow_a_link_in_the_job_directory(self):
        """The job's output file replaced by a link to a file colo must not show: refused."""
        secret = self.write(os.path.join(self.tmp, "secret"), "secret\n", 0o600)
        job = self.submit("--", "sh", "-c", "echo out")
        self.finished(job)
        path = self.colo_json("logs", job)["stdout"]
        os.unlink(path)
        os.symlink(secret, path)
        r = self.colo("logs", job)
        self.assertEqual(r.returncode, 1)
        self.assertNotIn("secret", r.stdout)
        self.assertIn("symbolic link", r.stderr)

    # --- queue, history, show ---

    def test_queue_gpus_column_format_and_json(self):
        release = os.path.join(self.work, "release")
        job = self.submit("--gpus", "2", "--mem", "1GiB", "--name", "two", "--", "wait-for",
                          release)
        self.wait_state(job, "running")
        waiting = self.submit("--gpus", "2", "--share", "exclusive", "--", "true")
        lines = self.colo_ok("queue").stdout.splitlines()
        self.assertEqual(lines[0].split(),
                         ["JOBID", "NAME", "USER", "ST", "NGPU", "MEM", "TIME", "GPUS(REASON)"])
        row = next(l for l in lines if l.split()[0] == str(job))
        self.assertEqual(row.split()[3], "R")
        self.assertIn("0,1 (", row)
        self.assertNotIn("GPU-", row)  # indices, not UUIDs
        pending = next(l for l in lines if l.split()[0] == str(waiting))
        self.assertEqual(pending.split()[3], "PD")
        custom = self.colo_ok("queue", "--format", "%i|%.5N|%T|%b|%j", "--noheader").stdout
        self.assertIn(f"{job}|  0,1|RUNNING|gpu:2|two\n", custom)
        self.assertIn(f"{waiting}|    -|PENDING|gpu:2|true\n", custom)
        bad = self.colo("queue", "--format", "%i %Z")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("unknown field %Z", bad.stderr)
        summary = next(j for j in self.colo_json("queue")["jobs"] if j["id"] == job)
        self.assertEqual(summary["gpu_indices"], [0, 1])
        self.assertEqual(len(summary["gpu_uuids"]), 2)
        self.assertEqual(summary["memory"], 1 << 30)  # bytes
        detail = self.show(job)
        self.assertEqual(detail["attempt_list"][0]["gpus"], [0, 1])
        self.assertIn("GPU-", self.colo_ok("show", job).stdout)  # UUIDs in show
        self.write(release, "")
        self.finished(job)

    def test_wide_and_accented_names_keep_the_columns_aligned(self):
        # A cell is cut by the columns a terminal draws, not by bytes: every row's USER column
        # starts where the header's does.
        release = os.path.join(self.work, "release")
        names = ("训练任务-长名字-resnet50", "réseau-de-neurones-profond", "plain")
        jobs = [self.submit("--mem", "1GiB", "--name", name, "--", "wait-for", release)
                for name in names]
        for job in jobs:
            self.wait_state(job, "running")

        def columns(text):
            return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

        for command in ("queue", "history"):
            if command == "history":
                self.write(release, "")
                for job in jobs:
                    self.finished(job)
            lines = self.colo_ok(command).stdout.splitlines()
            rows = [l for l in lines[1:] if l.split() and l.split()[0] in map(str, jobs)]
            self.assertEqual(len(rows), 3, lines)
            header_at = columns(lines[0][:lines[0].index("USER")])
            user = self.show(jobs[0])["user"]
            for row in rows:
                self.assertEqual(columns(row[:row.index(" " + user + " ") + 1]), header_at,
                                 f"{command}: {lines[0]!r}\n{row!r}")
            # NAME is 18 columns: 17 of the name and a '+'.
            for fitted in ("训练任务-长名字-r+", "réseau-de-neurone+"):
                self.assertTrue(any(fitted in row for row in rows), f"{fitted}: {rows}")

    def test_history_exit_code_peak_and_attempts(self):
        failed = self.submit("--name", "fails", "--", "sh", "-c", "exit 3")
        retried = self.submit("--mem", "1GiB", "--share", "plain", "--name", "retried", "--",
                              "oom-once")
        self.finished(failed)
        self.assertEqual(self.finished(retried)["state"], "succeeded")
        lines = self.colo_ok("history").stdout.splitlines()
        header = lines[0].split()
        for column in ("EXIT", "PEAK", "ATTEMPTS", "ST"):
            self.assertIn(column, header)
        custom = self.colo_ok("history", "--format", "%i|%X|%A|%t|%Y", "--noheader").stdout
        rows = {l.split("|")[0]: l.split("|")[1:] for l in custom.splitlines()}
        self.assertEqual(rows[str(failed)][:3], ["3:0", "1", "F"])
        self.assertEqual(rows[str(retried)][:3], ["0:0", "2", "CD"])
        jobs = {j["id"]: j for j in self.colo_json("history")["jobs"]}
        self.assertEqual(jobs[failed]["exit_code"], 3)
        self.assertIsInstance(jobs[failed]["peak"], int)
        self.assertEqual(jobs[retried]["attempts"], 2)

    def test_the_submitters_umask_makes_the_jobs_files(self):
        """colo submit passes its umask with the job: colod stores it, colo show prints it, and
        the job's processes (the user's -o copy included) make their files with it."""
        old = os.umask(0o027)
        try:
            job = self.submit("-o", "copy-%j.txt", "--", "sh", "-c",
                              "umask; touch made; stat -c %a made")
        finally:
            os.umask(old)
        self.assertEqual(self.finished(job)["state"], "succeeded")
        self.assertEqual(self.show(job)["umask"], 0o027)
        self.assertIn("Umask=0027", self.colo_ok("show", job).stdout)
        self.assertEqual(self.colo_ok("logs", job).stdout, "0027\n640\n")
        copy = os.path.join(self.work, f"copy-{job}.txt")
        self.assertEqual(os.stat(copy).st_mode & 0o777, 0o640)
        self.assertEqual(os.stat(os.path.join(self.work, "made")).st_mode & 0o777, 0o640)

    def test_help_has_the_state_legend_and_the_format_codes(self):
        for args in (("--help",), ("queue", "--help"), ("history", "--help")):
            out = self.colo_ok(*args).stdout
            self.assertRegex(out, r"\n  PD +PENDING ")
            self.assertRegex(out, r"\n  CD +COMPLETED ")
        self.assertIn("%N  GPUS", self.colo_ok("queue", "--help").stdout)
        self.assertIn("Exit codes: 0 ok; 1", self.colo_ok("--help").stdout)

    # --- errors ---

    def test_json_errors_and_exit_codes(self):
        r = self.colo("show", 999, "--json")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(json.loads(r.stdout),
                         {"error": {"code": "not_found", "message": "no job 999"}})
        r = self.colo("queue", "--json", "--no-such-option")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "invalid_argument")
        self.assertEqual(self.colo("queue", "--no-such-option").returncode, 2)
        self.assertEqual(self.colo().returncode, 2)  # no command
        self.assertEqual(self.colo("no-such-command").returncode, 2)
        r = self.colo("submit", "--json")  # nothing to submit
        self.assertEqual(r.returncode, 2)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "invalid_argument")
        r = self.colo("submit", "--json", "--gpus", "2", "--mem", "79GiB", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "infeasible")
        gone = os.path.join(self.tmp, "nobody-listens.sock")
        r = self.colo("queue", "--json", env=self.client_env(socket_path=gone))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "unavailable")

    def test_every_command_takes_help_and_all_but_top_json(self):
        """As the README says: each command `colo --help` lists has --help, and --json unless
        it is the live view."""
        listing = self.colo_ok("--help").stdout.split("Subcommands:\n")[1].split("\n\n")[0]
        commands = [line.split()[0] for line in listing.splitlines() if line.strip()]
        self.assertIn("submit", commands)
        for command in commands:
            with self.subTest(command=command):
                text = self.colo_ok(command, "--help").stdout
                self.assertIn("-h,--help", text)
                self.assertEqual("--json" in text, command != "top", command)

    def test_bad_option_values_are_usage_errors(self):
        """A value an option cannot take is a usage error: exit 2 and a message naming the
        option, before anything is asked of colod (and --json gives it as JSON)."""
        cases = [(("submit", "--time", "2h", "--", "true"), "--time: '2h' is not a time limit"),
                 (("submit", "-d", "singleton", "--", "true"), "'singleton'"),
                 (("submit", "--after", "twelve", "--", "true"), "--after"),
                 (("submit", "--array", "5-1", "--", "true"), "--array"),
                 (("submit", "--export", "=x", "--", "true"), "--export"),
                 (("submit", "-o", "out-%q.txt", "--", "true"), "--output"),
                 (("submit", "--mem", "12q", "--", "true"), "--mem"),
                 (("submit", "--gres", "tpu:2", "--", "true"), "--gres"),
                 (("submit", "--gpus", "0", "--", "true"), "--gpus"),
                 (("cancel", "--state", "bogus"), "--state"),
                 (("queue", "--format", "%i %Z"), "unknown field %Z"),
                 (("history", "--format", "JobID,Bogus"), "Bogus"),
                 (("report", "--since", "yesterday"), "--since"),
                 (("queue", "-u"), "-u"),
                 (("submit", "--batch", "-3", "--", "true"), "--batch"),
                 (("estimate", "x.json", "--batch", "0"), "--batch"),
                 (("sim", "--trace", "synthetic", "--jobs", "-5"), "--jobs"),
                 (("sim", "--trace", "synthetic", "--jobs", "0"), "--jobs"),
                 (("sim", "--trace", "synthetic", "--rate", "0"), "--rate"),
                 (("sim", "--trace", "synthetic", "--users", "0"), "--users")]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.colo(*args)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
        r = self.colo("submit", "--json", "--time", "2h", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "invalid_argument")
        self.assertEqual(self.colo_json("queue")["jobs"], [])

    def test_hold_and_release_answer_once_per_job(self):
        """`colo hold` of a running job says why once, naming the job once; of a waiting one
        says it is held."""
        release = os.path.join(self.work, "release")
        running = self.submit("--gpus", "2", "--share", "exclusive", "--", "wait-for", release)
        self.wait_state(running, "running")
        waiting = self.submit("--", "true")
        r = self.colo("hold", running)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, f"colo: job {running} is running; only a waiting job can be "
                                   "held\n")
        r = self.colo_ok("hold", waiting)
        self.assertEqual(r.stdout, f"job {waiting}: held\n")
        self.assertEqual(self.colo_ok("release", waiting).stdout, f"job {waiting}: queued\n")
        self.write(release, "")
        self.finished(waiting)

    def test_the_socket_lookup_ends_at_the_system_socket(self):
        """Without --socket and $COLO_SOCKET (and no personal colod), colo asks the system's."""
        if os.path.exists("/run/colo/colod.sock"):
            self.skipTest("a system colod runs here")
        env = self.client_env()
        env["XDG_RUNTIME_DIR"] = self.mkdir("runtime", mode=0o700)
        r = self.colo("queue", env=env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("/run/colo/colod.sock", r.stderr)


class ConfigTest(harness.E2ETest):
    def test_check_config_prints_every_setting_as_a_config(self):
        """Every key of the packaged sample appears, and the output is itself a valid config."""
        sample = os.path.join(harness.SOURCE_DIR, "packaging", "colod.toml")
        out = subprocess.run([harness.COLOD, "--config", sample, "--check-config"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        printed, table = set(), None
        for line in out.stdout.splitlines():
            if line.startswith("["):
                table = line.strip("[]")
            elif "=" in line and not line.startswith("#"):
                printed.add(f"{table}.{line.split('=')[0].strip()}")
        known, table = set(), None
        with open(sample) as f:
            for line in f:
                line = line.strip().lstrip("# ")
                if line.startswith("[") and line.endswith("]"):
                    table = line.strip("[]")
                elif "=" in line and table and line.split("=")[0].strip().isidentifier():
                    known.add(f"{table}.{line.split('=')[0].strip()}")
        self.assertFalse(known - printed, f"not printed: {sorted(known - printed)}")
        again = self.write(os.path.join(self.tmp, "again.toml"), out.stdout)
        second = subprocess.run([harness.COLOD, "--config", again, "--check-config"],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(second.stdout.splitlines()[1:], out.stdout.splitlines()[1:])
        # Sizes read as a person writes them, not in bytes.
        self.assertIn('\noom_extra = "512MiB"\n', out.stdout)
        self.assertIn('\nmemory_margin = "2GiB"\n', out.stdout)
        bad = self.write(os.path.join(self.tmp, "bad.toml"), "[limits]\nmax_clients = \"x\"\n")
        r = subprocess.run([harness.COLOD, "--config", bad, "--check-config"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("limits.max_clients must be a number", r.stderr)

    def test_colod_usage_errors_exit_2(self):
        """An unknown option or a value colod's options cannot take is a usage error, as
        colod(8) says: exit 2 and a message naming the option, nothing started."""
        state = os.path.join(self.tmp, "never-made")
        for args, message in ((["--bogus"], "--bogus"),
                              (["--fake-gpus", "abc"], "--fake-gpus"),
                              (["--fake-gpus", "-1"], "--fake-gpus"),
                              (["--fake-gpus", "0"], "--fake-gpus"),
                              (["--metrics-port", "99999"], "--metrics-port"),
                              (["--policy", "bogus"], "unknown policy 'bogus'")):
            with self.subTest(args=args):
                r = subprocess.run([harness.COLOD, "--state-dir", state, "--socket",
                                    os.path.join(self.tmp, "s.sock"), *args],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertFalse(os.path.exists(state), "colod started")
        for args in (["--help"], ["--version"]):
            r = subprocess.run([harness.COLOD, *args], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_sighup_reloads_the_config(self):
        """A changed limit applies at once; a changed policy is named as needing a restart; a
        broken file is refused and the running config stays."""
        user = harness.unprivileged_user() if harness.is_root() else None
        daemon = self.colod(config={"limits": {"max_clients_per_user": 8}})

        def hellos(count):
            socks = harness.connect_as(daemon.socket, user, count=count)
            try:
                return [harness.request(s, {"api": 1, "op": "hello"}) for s in socks]
            finally:
                for s in socks:
                    s.close()

        self.assertTrue(all(r and r.get("ok") for r in hellos(3)))
        harness.write_config(daemon.config_path, {"limits": {"max_clients_per_user": 2},
                                                  "scheduler": {"policy": "best-fit"}})
        daemon.proc.send_signal(signal.SIGHUP)
        line = wait_until(lambda: next((l for l in daemon.current_log().splitlines()
                                        if "reloaded" in l), None), 10, "the reload's log line")
        self.assertIn("applied: limits.max_clients_per_user 8 -> 2", line)
        self.assertIn("needs a restart: scheduler.policy", line)
        replies = hellos(3)
        self.assertEqual(sum(1 for r in replies if r and r.get("ok")), 2, replies)
        self.write(daemon.config_path, "[limits]\nmax_clients = \"many\"\n")
        daemon.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "reload refused" in daemon.current_log(), 10, "the refusal")
        self.assertTrue(daemon.alive())
        self.assertEqual(sum(1 for r in hellos(3) if r and r.get("ok")), 2)


if __name__ == "__main__":
    harness.main()
