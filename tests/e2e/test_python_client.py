#!/usr/bin/env python3
"""The `colo` Python package's client against a real colod (fake GPUs): submit with a declared
size and with an estimate from a profile, status, queue, wait, logs, cancel, history and GPUs;
the API's errors as exceptions with their codes. The package is imported from the build (what
`colo-profile --python-path` names), so this tests what is shipped.
"""

import json
import os
import shutil
import sys

import harness

sys.path.insert(0, os.path.join(harness.BIN_DIR, "..", "python"))
import colo  # noqa: E402

GIB = 1 << 30


class PythonClientTest(harness.E2ETest):
    def setUp(self):
        super().setUp()
        self.work = self.mkdir("work")
        self.daemon = self.colod()
        self.client = colo.Client(self.daemon.socket, colo_binary=harness.COLO)
        # The jobs get the test's token, so that cleanup finds whatever they leave.
        self.env = self.client_env(socket_path=self.daemon.socket)

    def submit(self, command, **options):
        options.setdefault("env", self.env)
        options.setdefault("workdir", self.work)
        return self.client.submit(command, **options)

    def test_submit_wait_status_logs_history(self):
        job = self.submit(["sh", "-c", "echo hello from $COLO_JOB_ID; echo oops >&2"],
                          memory="2GiB", name="greeter")
        self.assertIsInstance(job, int)
        done = self.client.wait(job, timeout=harness.JOB_DEADLINE)
        self.assertTrue(done.succeeded, done)
        self.assertEqual(done.name, "greeter")
        self.assertEqual(done.memory_bytes, 2 * GIB)
        self.assertEqual(done.command, ("sh", "-c", "echo hello from $COLO_JOB_ID; echo oops >&2"))
        [attempt] = done.attempt_list
        self.assertEqual(attempt.exit_kind, "success")
        self.assertEqual(len(attempt.gpu_uuids), 1)
        self.assertEqual(self.client.logs(job), f"hello from {job}\n")
        self.assertEqual(self.client.logs(job, stderr=True), "oops\n")
        # A log is its owner's file: the client reads its end, never more than max_bytes.
        self.assertEqual(self.client.logs(job, max_bytes=6), f"hello from {job}\n"[-6:])
        self.assertIn(job, [j.id for j in self.client.history()])
        gpus = self.client.gpus()
        self.assertEqual(len(gpus), 2)
        self.assertTrue(all(g.memory_total_bytes > 0 for g in gpus), gpus)

    def test_the_job_gets_this_process_umask_and_limits(self):
        """The client sends its umask and resource limits, as `colo submit` does: a job
        submitted under umask 077 and a soft open-files limit of 200 makes its files 0600 and
        runs with that limit."""
        import resource
        mask = os.umask(0o077)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, hard))
        try:
            job = self.submit(["sh", "-c", "ulimit -Sn; echo x > made"])
        finally:
            os.umask(mask)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        self.assertTrue(self.client.wait(job, timeout=harness.JOB_DEADLINE).succeeded)
        self.assertEqual(self.client.logs(job), "200\n")
        self.assertEqual(os.stat(os.path.join(self.work, "made")).st_mode & 0o777, 0o600)

    def test_a_preemptible_job_with_its_signal(self):
        """requeue and signal as `colo submit --requeue --signal` send them; a bad signal is
        refused before anything is sent."""
        job = self.submit(["true"], requeue=True, signal="B:USR1@120")
        shown = self.client.call("show", job=job)["job"]
        self.assertEqual((shown["requeue"], shown["signal"]), (True, {"number": 10, "lead_s": 120}))
        # Past 4300 digits Python's int() itself refuses: still colo's error, not a ValueError.
        for bad in ("NOPE@1", "USR1@", "USR1@-5", "USR1@ 5", "USR1@+5", "USR1@65536", "@5",
                    "USR1@" + "9" * 5000, "9" * 5000 + "@5"):
            with self.assertRaises(colo.InvalidArgument, msg=bad):
                colo.client.parse_signal(bad)
            with self.assertRaises(colo.InvalidArgument, msg=bad):
                self.submit(["true"], requeue=True, signal=bad)
        self.assertEqual(colo.client.parse_signal("SIGusr2"), {"number": 12, "lead_s": 60})
        self.assertEqual(colo.client.parse_signal("10@0"), {"number": 10, "lead_s": 0})
        self.assertEqual(colo.client.parse_signal("USR1@" + "0" * 5000 + "7"),
                         {"number": 10, "lead_s": 7})
        with self.assertRaises(colo.InvalidArgument) as refused:
            self.submit(["true"], requeue=True, signal="KILL")
        self.assertIn("must be one of HUP", str(refused.exception))
        self.assertTrue(self.client.wait(job, timeout=harness.JOB_DEADLINE).succeeded)

    def test_output_files(self):
        job = self.submit(["sh", "-c", "echo out; echo err >&2"], output="o-%j.txt",
                          error="e-%j.txt")
        self.assertTrue(self.client.wait(job, timeout=harness.JOB_DEADLINE).succeeded)
        with open(os.path.join(self.work, f"o-{job}.txt")) as f:
            self.assertEqual(f.read(), "out\n")
        with open(os.path.join(self.work, f"e-{job}.txt")) as f:
            self.assertEqual(f.read(), "err\n")
        with self.assertRaises(colo.InvalidArgument):
            self.submit(["true"], output="bad-%q")

    def test_queue_and_cancel(self):
        job = self.submit(["sleep", "60"], memory="1GiB")
        running = harness.wait_until(
            lambda: next((j for j in self.client.queue() if j.id == job and j.state == "running"),
                         None), 20, "the job to run")
        self.assertEqual(len(running.gpu_uuids), 1)
        self.client.cancel(job)
        self.assertEqual(self.client.wait(job, timeout=30).state, "cancelled")
        self.assertNotIn(job, [j.id for j in self.client.queue()])

    def test_the_queue_follows_every_page(self):
        """colod answers the queue 500 jobs a page; the client's queue() has all 600 held."""
        r = self.colo("submit", "--json", "--hold", "--array", "0-599", "--", "true",
                      daemon=self.daemon, cwd=self.work)
        self.assertEqual(r.returncode, 0, r.stderr)
        first = int(json.loads(r.stdout)["job"])
        jobs = self.client.queue()
        self.assertEqual([j.id for j in jobs], list(range(first, first + 600)))
        self.client.cancel(first)
        self.assertEqual(self.client.queue(), [])

    def test_submit_with_an_estimate_from_a_profile(self):
        src = os.path.join(harness.DATA_DIR, "estimate", "tv-resnet18-b32-adam")
        shutil.copy(src + ".json", os.path.join(self.work, "model.json"))
        shutil.copy(src + ".b32.trace", os.path.join(self.work, "tv-resnet18-b32-adam.b32.trace"))
        job = self.submit(["true"], estimate_from=os.path.join(self.work, "model.json"),
                          gpu_model="H100")
        done = self.client.wait(job, timeout=harness.JOB_DEADLINE)
        self.assertTrue(done.succeeded, done)
        self.assertEqual(done.estimate["estimator"], "trace")
        self.assertEqual(done.memory_bytes, done.estimate["upper"])
        self.assertGreater(done.estimate["predicted_smact"], 0)

    def test_errors_carry_the_apis_codes(self):
        with self.assertRaises(colo.NotFound) as raised:
            self.client.status(987654)
        self.assertEqual(raised.exception.code, "not_found")
        with self.assertRaises(colo.Infeasible) as raised:
            self.submit(["true"], gpus=64)
        self.assertIn("64", raised.exception.message)
        with self.assertRaises(colo.InvalidArgument):
            self.submit(["true"], memory="12 parsecs")
        with self.assertRaises(colo.InvalidArgument):
            self.submit("true")  # a string, not argv
        with self.assertRaises(colo.InvalidArgument):
            self.submit(["true"], estimate_from=os.path.join(self.work, "missing.json"))
        with self.assertRaises(colo.Unreachable):
            colo.Client(os.path.join(self.tmp, "no-such.sock")).queue()
        with self.assertRaises(TimeoutError):
            self.client.wait(self.submit(["sleep", "30"], memory="1GiB"), timeout=0.5)

    def test_a_command_that_cannot_run_is_refused(self):
        """As `colo submit`: a first word that is no file of the caller's and on no PATH the
        job gets is refused before colod is asked; the job's own PATH is the one searched."""
        for command, message in ((["no-such-program-colo"], "no command of that name"),
                                 (["./missing.sh"], "no such file"),
                                 (["/tmp"], "is a directory")):
            with self.subTest(command=command):
                with self.assertRaises(colo.InvalidArgument) as raised:
                    self.submit(command)
                self.assertIn(message, raised.exception.message)
        self.assertEqual(self.client.queue(), [])
        mine = self.mkdir("mine")
        self.write(os.path.join(mine, "only-here"), "#!/bin/sh\necho here\n", 0o755)
        env = dict(self.env, PATH=mine + ":" + self.env["PATH"])
        job = self.submit(["only-here"], env=env)
        self.assertEqual(self.client.wait(job, timeout=30).state, "succeeded")


if __name__ == "__main__":
    harness.main()
