#!/usr/bin/env python3
"""The Slurm habits of colo through the real binaries: --time limits (state timeout, also across a
colod restart), dependencies, hold and release, requeue, cancel of several jobs and by filters,
colo wait, priorities within one user, --export and --chdir.
"""

import json
import os
import subprocess
import time
import uuid

import harness
from harness import wait_until

TERMINAL = {"succeeded", "failed", "cancelled", "lost", "timeout"}
GIB = 1 << 30

WAIT_SCRIPT = """#!/bin/sh
echo "started $COLO_JOB_ID"
i=0
while [ ! -e "$1" ]; do
  i=$((i + 1))
  if [ $i -gt 1200 ]; then echo "gave up" >&2; exit 3; fi
  sleep 0.05
done
"""

CONFIG = {"jobs": {"timeout_grace": "1s"}}


class Base(harness.OneColodTest):
    fake_gpus = 2

    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.write(os.path.join(self.bin, "wait-for"), WAIT_SCRIPT, 0o755)
        self.work = self.mkdir("work")
        self.daemon = self.colod(config=CONFIG, fake_gpus=self.fake_gpus)

    def wait_job(self, *args, **kwargs):
        """A job that runs until released: (job, release path)."""
        release = os.path.join(self.tmp, f"release-{uuid.uuid4().hex[:8]}")
        job = self.submit(*args, "--", "wait-for", release, **kwargs)
        return job, release

    def release(self, path):
        self.write(path, "")

    def queue(self, **kwargs):
        return {j["id"]: j for j in self.colo_json("queue", **kwargs)["jobs"]}

    def blockers(self):
        """Both fake GPUs taken by running 70 GiB jobs: [(job, release)]."""
        jobs = [self.wait_job("--mem", "70GiB") for _ in range(self.fake_gpus)]
        for job, _ in jobs:
            self.wait_state(job, "running")
        return jobs



class JobControlTest(Base):
    # --- --time ---

    def test_time_limit_ends_a_job_as_timeout(self):
        """--time MIN:SEC: SIGTERM at the limit, SIGKILL after timeout_grace to a job that
        ignores it; the state is timeout (TO in queue and history) and the limit is shown."""
        began = time.monotonic()
        job = self.submit("--time", "0:02", "--", "sh", "-c",
                          "trap '' TERM; echo ready; exec wait-for \"$0\"",
                          os.path.join(self.tmp, "never"))
        quick = self.submit("--time", "1", "--", "true")
        self.assertEqual(self.wait_state(quick, TERMINAL)["state"], "succeeded")
        self.assertEqual(self.queue()[job]["time_limit_s"], 2)
        detail = self.wait_state(job, TERMINAL)
        self.assertEqual(detail["state"], "timeout", json.dumps(detail)[:2000])
        self.assertGreaterEqual(time.monotonic() - began, 2.9, "killed before limit + grace")
        self.assertIn("time limit of 00:00:02 reached", detail["reason"])
        self.assertEqual(detail["attempt_list"][-1]["exit_kind"], "timeout")
        self.assertEqual(detail["exit_signal"], 9)
        self.assertIn("timeout", [e["kind"] for e in detail["events"]])
        history = self.colo_ok("history").stdout
        self.assertRegex(history, rf"(?m)^\s*{job} .* TO ")
        self.assertEqual(harness.processes_with_token(self.token, f"COLO_JOB_ID={job}\0"), [])

    def test_time_limit_counts_from_the_start_across_a_restart(self):
        """A colod killed while a job runs comes back and stops the job at its limit counted
        from the attempt's start, not from colod's restart."""
        job = self.submit("--time", "0:06", "--", "sleep", "60")
        self.wait_state(job, "running")
        time.sleep(3)
        self.daemon.kill9()
        self.daemon.start()
        detail = self.wait_state(job, TERMINAL)
        self.assertEqual(detail["state"], "timeout")
        attempt = detail["attempt_list"][-1]
        ran = attempt["ended"] - attempt["started"]
        self.assertGreaterEqual(ran, 5.5)
        self.assertLess(ran, 8.5, "the limit was counted from the restart")

    def test_bad_time_limits_are_refused(self):
        for bad in ("abc", "1:2:3:4", "-5", "0", "1-", "400-0"):
            with self.subTest(time=bad):
                r = self.colo("submit", "--time", bad, "--", "true")
                self.assertEqual(r.returncode, 2, r.stderr)  # a usage error
                self.assertIn("--time", r.stderr)
        for good, seconds in (("90", 5400), ("1:30", 90), ("1:00:00", 3600), ("2-1", 176400),
                              ("1-0:0:5", 86405)):
            with self.subTest(time=good):
                job = self.submit("--hold", "--time", good, "--", "true")
                self.assertEqual(self.show(job)["time_limit_s"], seconds)
                self.colo_ok("cancel", job)

    # --- Dependencies ---

    def test_dependencies(self):
        """--after, afterok, afternotok and afterany wait for their job; one that can never be
        met is cancelled with DependencyNeverSatisfied; an unknown job is refused."""
        a, release_a = self.wait_job()
        after = self.submit("--after", a, "--", "true")
        ok = self.submit("--dependency", f"afterok:{a}", "--", "true")
        notok = self.submit("-d", f"afternotok:{a}", "--", "true")
        both = self.submit("--dependency", f"afterany:{a},afterok:{ok}", "--", "true")
        self.wait_state(a, "running")
        queue = self.queue()
        for job in (after, ok, notok, both):
            self.assertEqual(queue[job]["state"], "queued")
            self.assertIn("dependency", queue[job]["reason"])
        self.assertIn(f"dependency afterany:{a}", self.colo_ok("queue").stdout)
        self.release(release_a)
        self.assert_succeeded(a)
        self.assert_succeeded(after)
        self.assert_succeeded(ok)
        self.assert_succeeded(both)
        detail = self.wait_state(notok, TERMINAL)
        self.assertEqual(detail["state"], "cancelled")
        self.assertIn("DependencyNeverSatisfied", detail["reason"])
        self.assertEqual(detail["attempt_list"], [])
        # A job that depends on a cancelled one is cancelled in turn.
        chained = self.submit("--dependency", f"afterok:{notok}", "--", "true")
        self.assertEqual(self.wait_state(chained, TERMINAL)["state"], "cancelled")

        r = self.colo("submit", "--after", "99999", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no job 99999", r.stderr)
        for bad in ("after:1", "afterok", "afterok:x", "singleton"):
            with self.subTest(dependency=bad):
                r = self.colo("submit", "--dependency", bad, "--", "true")
                self.assertEqual(r.returncode, 2)
                self.assertIn("--dependency", r.stderr)

    def test_dependency_survives_a_restart(self):
        a, release_a = self.wait_job()
        b = self.submit("--dependency", f"afterok:{a}", "--", "true")
        self.wait_state(a, "running")
        self.daemon.stop()
        self.daemon.start()
        self.assertIn("dependency", self.queue()[b]["reason"])
        self.release(release_a)
        self.assert_succeeded(a)
        self.assert_succeeded(b)

    # --- Hold, release, requeue ---

    def test_hold_and_release(self):
        """submit --hold waits until colo release; colo hold keeps a waiting job from starting
        while later ones start; a hold survives a restart."""
        held = self.submit("--hold", "--", "true")
        self.assertIn("held", self.queue()[held]["reason"])
        self.assertIn("held", self.colo_json("explain", held)["summary"])
        blockers = self.blockers()
        waiting = self.submit("--mem", "70GiB", "--", "true")
        later = self.submit("--mem", "70GiB", "--", "true")
        r = self.colo_ok("hold", waiting)
        self.assertEqual(r.stdout, f"job {waiting}: held\n")
        self.daemon.stop()
        self.daemon.start()
        self.release(blockers[0][1])
        self.assert_succeeded(later)
        queue = self.queue()
        self.assertEqual(queue[waiting]["state"], "queued")
        self.assertIn("held", queue[waiting]["reason"])
        self.assertEqual(queue[held]["state"], "queued")
        self.assertEqual(self.show(held)["attempt_list"], [])
        r = self.colo_ok("release", waiting, held)
        self.assertEqual(r.stdout, f"job {waiting}: queued\njob {held}: queued\n")
        self.assert_succeeded(waiting)
        self.assert_succeeded(held)
        # Only waiting jobs can be held.
        r = self.colo("hold", blockers[1][0])
        self.assertEqual(r.returncode, 1)
        self.assertIn("only a waiting job", r.stderr)
        self.release(blockers[1][1])

    def test_requeue_running_and_ended(self):
        """colo requeue of a running job stops it and runs it again (attempt 2); of an ended job
        queues it again, with a minimal environment."""
        job, release = self.wait_job()
        self.wait_state(job, "running")
        self.assertEqual(self.colo_ok("requeue", job).stdout, f"job {job}: requeueing\n")
        wait_until(lambda: len(self.show(job)["attempt_list"]) == 2, 20, "a second attempt")
        detail = self.wait_state(job, "running")
        self.assertEqual(detail["attempt_list"][0]["exit_kind"], "cancelled")
        self.release(release)
        self.assert_succeeded(job)

        done = self.submit("--", "sh", "-c", 'echo "MYVAR=${MYVAR-unset}"',
                           extra_env={"MYVAR": "kept"})
        self.assert_succeeded(done)
        self.assertIn("MYVAR=kept", self.colo_ok("logs", done).stdout)
        self.assertEqual(self.colo_ok("requeue", done).stdout, f"job {done}: queued\n")
        wait_until(lambda: len(self.show(done)["attempt_list"]) == 2, 20, "a second attempt")
        self.assert_succeeded(done)
        self.assertIn("MYVAR=unset", self.colo_ok("logs", done).stdout)
        r = self.colo("requeue", 99999)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no job 99999", r.stderr)

    def test_a_cancel_while_a_requeue_stops_the_job_ends_it(self):
        """scancel after scontrol requeue: a job that takes its time to stop (it ignores SIGTERM)
        is cancelled for good, not queued again, and colo requeue no longer takes it."""
        release = os.path.join(self.tmp, "release-requeue")
        job = self.submit("--", "sh", "-c", 'trap "" TERM; wait-for "$0"', release)
        self.wait_state(job, "running")
        # Its trap is set once wait-for has said it started.
        wait_until(lambda: "started" in self.colo("logs", job).stdout, 20, "the job to start")
        self.assertEqual(self.colo_ok("requeue", job).stdout, f"job {job}: requeueing\n")
        self.assertEqual(self.colo_ok("cancel", job).stdout, f"job {job}: cancelling\n")
        r = self.colo("requeue", job)
        self.assertEqual(r.returncode, 1)
        self.assertIn("being cancelled", r.stderr)
        detail = self.wait_state(job, TERMINAL)
        self.assertEqual((detail["state"], len(detail["attempt_list"])), ("cancelled", 1),
                         json.dumps(detail)[:2000])
        self.release(release)

    # --- Cancel, wait ---

    def test_cancel_several_and_by_filters(self):
        group = [self.submit("--hold", "--name", "grp", "--", "true") for _ in range(3)]
        others = [self.submit("--hold", "--name", "other", "--", "true") for _ in range(2)]
        r = self.colo_ok("cancel", "--name", "grp")
        self.assertEqual(sorted(r.stdout.splitlines()),
                         sorted(f"job {j}: cancelled" for j in group))
        for j in group:
            self.assertEqual(self.show(j)["state"], "cancelled")
        running, release = self.wait_job()
        self.wait_state(running, "running")
        self.colo_ok("cancel", "--state", "PD")
        for j in others:
            self.assertEqual(self.show(j)["state"], "cancelled")
        self.assertEqual(self.show(running)["state"], "running")
        more = [self.submit("--hold", "--", "true") for _ in range(2)]
        # Several ids: each answered; one that cannot be cancelled fails alone (exit 1).
        r = self.colo("cancel", more[0], 99999, more[1])
        self.assertEqual(r.returncode, 1)
        self.assertIn("job 99999: no job 99999", r.stderr)
        self.assertEqual(r.stdout, f"job {more[0]}: cancelled\njob {more[1]}: cancelled\n")
        r = self.colo("cancel", "--json", running, group[0])
        self.assertEqual(r.returncode, 1, "one of them could not be cancelled")
        reply = json.loads(r.stdout)
        self.assertEqual([x["ok"] for x in reply["results"]], [True, False])
        self.assertEqual(reply["results"][1]["code"], "failed_precondition")
        self.assertEqual(self.wait_state(running, TERMINAL)["state"], "cancelled")
        self.assertEqual(self.colo("cancel", "--state", "bogus").returncode, 2)

    def start_wait(self, *ids):
        """`colo wait IDS` in the background, as the test's user."""
        return subprocess.Popen(
            harness.as_user(None, [harness.COLO, "wait", *map(str, ids)]),
            env=self.client_env(None, self.daemon.socket, path_prefix=self.bin), cwd=self.work,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_wait(self):
        """colo wait blocks until every job ends; its exit status is the first failing job's
        exit code, 0 when all succeeded."""
        a, release_a = self.wait_job()
        failing = self.submit("--", "sh", "-c", "exit 3")
        proc = self.start_wait(a, failing)
        time.sleep(1.5)
        self.assertIsNone(proc.poll(), "colo wait returned while a job runs")
        self.release(release_a)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 3, out + err)
        self.assertIn(f"job {a}: succeeded", out)
        self.assertIn(f"job {failing}: failed (exit code 3)", out)
        self.assertEqual(self.colo("wait", a).returncode, 0)
        self.assertEqual(self.colo("wait", a, failing).returncode, 3)
        r = self.colo("wait", 99999)
        self.assertEqual(r.returncode, 1)
        # An array's id waits for every task (sbatch --wait); ARRAY_0 for the first alone.
        release = os.path.join(self.tmp, "release-wait-array")
        r = self.colo_ok("submit", "-a", "0-2", "--", "sh", "-c",
                         'if [ "$COLO_ARRAY_TASK_ID" = 0 ]; then exit 0; fi; wait-for "$0"; '
                         'exit "$COLO_ARRAY_TASK_ID"', release)
        array = int(r.stdout.split()[3])
        self.assertEqual(self.colo("wait", f"{array}_0").returncode, 0)
        proc = self.start_wait(array)
        time.sleep(1.5)
        self.assertIsNone(proc.poll(), "colo wait ARRAY returned while tasks run")
        self.release(release)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 1, out + err)  # task 1's exit code comes first
        for i, state in enumerate(("succeeded", "failed (exit code 1)", "failed (exit code 2)")):
            self.assertIn(f"job {array}_{i}: {state}", out)

    # --- Arrays ---

    def test_array_tasks_capped_named_and_cancelled_by_the_array_id(self):
        release = os.path.join(self.tmp, "release-array")
        r = self.colo_ok("submit", "--array", "0-15:3%2", "--name", "sw-%A_%a", "--", "sh", "-c",
                         'echo "A=$COLO_ARRAY_JOB_ID T=$COLO_ARRAY_TASK_ID"; exec wait-for "$0"',
                         release)
        self.assertRegex(r.stdout, r"^Submitted array job \d+ \(6 tasks\)\n$")
        array = int(r.stdout.split()[3])
        tasks = {array + i: t for i, t in enumerate((0, 3, 6, 9, 12, 15))}

        def running():
            queue = self.queue()
            return [j for j in tasks if queue.get(j, {}).get("state") == "running"]

        wait_until(lambda: len(running()) == 2, 20, "two tasks to run")
        time.sleep(1)
        self.assertEqual(len(running()), 2, "%2 caps the array at two running tasks")
        queue = self.queue()
        self.assertIn("at most 2 of its tasks at once", queue[array + 5]["reason"])
        for job, task in tasks.items():
            self.assertEqual(queue[job]["array_job"], array)
            self.assertEqual(queue[job]["array_task"], task)
            self.assertEqual(queue[job]["name"], f"sw-{array}_{task}")
        self.assertIn(f"{array}_15 ", self.colo_ok("queue").stdout)
        self.release(release)
        for job, task in tasks.items():
            self.assert_succeeded(job)
            self.assertIn(f"A={array} T={task}", self.colo_ok("logs", job).stdout)

        r = self.colo_ok("submit", "--hold", "-a", "1,3,5", "--", "true")
        held = int(r.stdout.split()[3])
        self.assertEqual(self.queue()[held + 2]["array_task"], 5)
        r = self.colo_ok("cancel", held)
        self.assertEqual(r.stdout, f"job {held}: cancelled 3 task(s)\n")
        for job in (held, held + 1, held + 2):
            self.assertEqual(self.show(job)["state"], "cancelled")

        r = self.colo("submit", "--array", "0-1000", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("max_array_size", r.stderr)
        r = self.colo("submit", "--array", "5-1", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--array", r.stderr)

    # --- Priority, environment ---

    def test_priority_orders_only_ones_own_jobs(self):
        blockers = self.blockers()
        low = self.submit("--mem", "70GiB", "--", "true")
        high = self.submit("--mem", "70GiB", "--priority", "10", "--", "true")
        nice = self.submit("--mem", "70GiB", "--nice", "5", "--", "true")
        self.assertEqual(self.queue()[high]["priority"], 10)
        # The queue's order: high first, then low, then the nice one.
        positions = {j: self.colo_json("explain", j)["position"] for j in (high, low, nice)}
        self.assertEqual(sorted(positions, key=positions.get), [high, low, nice])
        for _, release in blockers:
            self.release(release)
        for j in (high, low, nice):
            self.assert_succeeded(j)
        started = {j: self.show(j)["attempt_list"][0]["started"] for j in (high, low, nice)}
        self.assertLessEqual(started[high], started[low])
        self.assertLessEqual(started[low], started[nice])

    def test_export_and_chdir(self):
        other = self.mkdir("elsewhere")
        job = self.submit("--export", "NONE,FOO=bar", "--chdir", other, "--", "/bin/sh", "-c",
                          'echo "FOO=$FOO HOME=${HOME-unset} PWD=$(pwd)"', extra_env={"FOO": "x"})
        self.assert_succeeded(job)
        out = self.colo_ok("logs", job).stdout
        self.assertIn("FOO=bar HOME=unset", out)
        self.assertIn(f"PWD={other}", out)
        job = self.submit("--export", "ALL,FOO=bar", "--", "/bin/sh", "-c",
                          'echo "FOO=$FOO HOME=${HOME-unset}"', extra_env={"FOO": "x"})
        self.assert_succeeded(job)
        self.assertIn("FOO=bar HOME=/", self.colo_ok("logs", job).stdout)
        job = self.submit("--export", "FOO", "--", "/bin/sh", "-c", 'echo "FOO=$FOO"',
                          extra_env={"FOO": "mine"})
        self.assert_succeeded(job)
        self.assertIn("FOO=mine", self.colo_ok("logs", job).stdout)

    # --- Output files (-o/-e), array task ids, logs' exit code ---

    def read_work(self, name):
        with open(os.path.join(self.work, name)) as f:
            return f.read()

    def test_output_files_take_slurm_patterns(self):
        """-o/-e with %j %x %u %a (padded) %%: stdout and stderr in the user's files, both in
        -o's without -e; colo show names the files; colo logs keeps its own copy."""
        both = self.submit("-o", "out-%j-%x-%%.txt", "--name", "nm", "--", "sh", "-c",
                           "echo to-out; echo to-err >&2")
        self.assert_succeeded(both)
        path = os.path.join(self.work, f"out-{both}-nm-%.txt")
        self.assertEqual(sorted(self.read_work(os.path.basename(path)).split()),
                         ["to-err", "to-out"])
        detail = self.show(both)
        self.assertEqual(detail["output_file"], path)
        self.assertEqual(detail["error_file"], path)
        self.assertIn(f"StdOut={path} StdErr={path}", self.colo_ok("show", both).stdout)
        self.assertEqual(self.colo_ok("logs", both).stdout, "to-out\n")

        split = self.submit("--output", "o-%u-%6j.txt", "-e", "e-%a.txt", "--", "sh", "-c",
                            "echo OUT; echo ERR >&2")
        self.assert_succeeded(split)
        owner = self.show(split)["user"]
        self.assertEqual(self.read_work(f"o-{owner}-{split:06d}.txt"), "OUT\n")
        # Outside an array %a is Slurm's 4294967294.
        self.assertEqual(self.read_work("e-4294967294.txt"), "ERR\n")

        # A job file's directives, and an array: one file per task.
        script = os.path.join(self.work, "job.sh")
        self.write(script, "#!/bin/sh\n#COLO --output=arr-%A_%a.out --array=0-2\n"
                           "echo task $COLO_ARRAY_TASK_ID\n", 0o755)
        r = self.colo_ok("submit", script)
        array = int(r.stdout.split()[3])
        for i in range(3):
            self.assert_succeeded(array + i)
            self.assertEqual(self.read_work(f"arr-{array}_{i}.out"), f"task {i}\n")

        # A job that empties its log (`> /dev/stderr` truncates it) loses nothing of the copy.
        trunc = self.submit("-e", "trunc.err", "--", "sh", "-c",
                            "echo one >&2; echo two >&2; sleep 0.6; echo three > /dev/stderr; "
                            "echo four >&2")
        self.assert_succeeded(trunc)
        self.assertEqual(self.read_work("trunc.err"), "one\ntwo\nthree\nfour\n")

        # A later attempt adds to what the earlier one wrote.
        again = self.submit("-o", "again.txt", "--", "sh", "-c", "echo attempt $COLO_ATTEMPT")
        self.assert_succeeded(again)
        self.colo_ok("requeue", again)
        wait_until(lambda: self.show(again)["attempts"] == 2 and
                   self.show(again)["state"] == "succeeded", 20, "the second attempt")
        self.assertEqual(self.read_work("again.txt"), "attempt 1\nattempt 2\n")

    def test_output_files_that_cannot_be_written(self):
        """A bad pattern or a missing directory is refused at submit; a file that cannot be
        opened when the job starts fails the job with the reason (as Slurm does)."""
        r = self.colo("submit", "-o", "x-%q.txt", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("%q is not a code colo knows", r.stderr)
        r = self.colo("submit", "-e", "no-such-dir/x.txt", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no-such-dir does not exist", r.stderr)
        r = self.colo("submit", "--json", "-o", "x-%", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "invalid_argument")
        job = self.submit("-o", "missing-%j/out.txt", "--", "sh", "-c", "echo ran")
        detail = self.wait_state(job, TERMINAL)
        self.assertEqual(detail["state"], "failed")
        logs = self.colo("logs", "--stderr", job)
        self.assertEqual(logs.returncode, 1)
        self.assertIn(f"cannot open output file {self.work}/missing-{job}/out.txt", logs.stdout)
        self.assertNotIn("ran", self.colo("logs", job).stdout)
        # /dev/null: no copy, colo's own log only.
        job = self.submit("-o", "/dev/null", "--", "sh", "-c", "echo kept")
        self.assert_succeeded(job)
        self.assertEqual(self.colo_ok("logs", job).stdout, "kept\n")

    def test_array_tasks_by_slurm_ids(self):
        """ARRAY_TASK (12_3) names one task wherever a job id goes: live jobs and history."""
        r = self.colo_ok("submit", "--hold", "--array", "0,4,7", "--", "true")
        array = int(r.stdout.split()[3])
        self.assertEqual(self.colo_json("show", f"{array}_4")["job"]["id"], array + 1)
        r = self.colo_ok("cancel", f"{array}_7")
        self.assertEqual(self.show(array + 2)["state"], "cancelled")
        self.assertEqual(self.show(array)["state"], "queued")
        self.colo_ok("release", f"{array}_0", f"{array}_4")
        self.assert_succeeded(array)
        self.assert_succeeded(array + 1)
        # Ended tasks are found in the history.
        self.assertIn(f"JobId={array + 1} ", self.colo_ok("show", f"{array}_4").stdout)
        self.assertEqual(self.colo_ok("wait", f"{array}_0", f"{array}_4").returncode, 0)
        r = self.colo("show", f"{array}_5")
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"no task 5 of array {array}", r.stderr)
        for bad in ("12_", "_3", "12_x", "0", "12-3"):
            r = self.colo("show", bad)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("is not a job id", r.stderr)

    def test_an_arrays_first_task_alone_and_arrays_under_filters(self):
        """ARRAY_ID cancels the whole array, ARRAY_0 its first task alone; cancel by filters
        cancels each matching task once (the array's id among them is its first task)."""
        array = int(self.colo_ok("submit", "--hold", "-a", "0-2", "--", "true").stdout.split()[3])
        self.assertEqual(self.colo_ok("cancel", f"{array}_0").stdout, f"job {array}_0: cancelled\n")
        self.assertEqual([self.show(array + i)["state"] for i in range(3)],
                         ["cancelled", "queued", "queued"])
        second = int(self.colo_ok("submit", "--hold", "-a", "0-3", "--", "true").stdout.split()[3])
        r = self.colo("cancel", "--state", "PD")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertEqual(r.stdout.count("cancelled"), 6, r.stdout)
        for job in list(range(array + 1, array + 3)) + list(range(second, second + 4)):
            self.assertEqual(self.show(job)["state"], "cancelled", job)
        whole = int(self.colo_ok("submit", "--hold", "-a", "0-2", "--", "true").stdout.split()[3])
        self.assertEqual(self.colo_ok("cancel", whole).stdout, f"job {whole}: cancelled 3 task(s)\n")
        # Each id as it is named: the first array whole, the second's first task alone.
        a = int(self.colo_ok("submit", "--hold", "-a", "0-2", "--", "true").stdout.split()[3])
        b = int(self.colo_ok("submit", "--hold", "-a", "0-1", "--", "true").stdout.split()[3])
        r = self.colo_ok("cancel", a, f"{b}_0")
        self.assertIn(f"job {a}: cancelled 3 task(s)", r.stdout)
        self.assertEqual([self.show(j)["state"] for j in (a, a + 1, a + 2, b, b + 1)],
                         ["cancelled"] * 4 + ["queued"])

    def test_logs_exit_like_the_job(self):
        ok = self.submit("--", "sh", "-c", "echo fine")
        bad = self.submit("--", "sh", "-c", "echo broken; exit 3")
        self.assert_succeeded(ok)
        self.assertEqual(self.wait_state(bad, TERMINAL)["state"], "failed")
        self.assertEqual(self.colo_ok("logs", ok).stdout, "fine\n")
        r = self.colo("logs", bad)
        self.assertEqual((r.returncode, r.stdout), (1, "broken\n"))
        self.assertIn(f"job {bad} failed", r.stderr)
        held = self.submit("--hold", "--", "true")
        r = self.colo("logs", held)
        self.assertEqual(r.returncode, 0)
        self.assertIn("has not started yet", r.stderr)
        self.colo_ok("cancel", held)
        r = self.colo("logs", held)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"job {held} cancelled before it started", r.stderr)


class OtherUsersTest(Base):
    """Priorities and filters where two users share the server (root: needs colo-alice)."""

    def setUp(self):
        if not harness.is_root() or harness.user_or_none("colo-alice") is None:
            self.skipTest("needs root and the user colo-alice")
        super().setUp()
        self.alice = harness.user_or_none("colo-alice")
        self.alice_work = self.mkdir("alice", user=self.alice, mode=0o700)

    def as_alice(self, *args):
        return self.colo(*args, user=self.alice, cwd=self.alice_work)

    def test_priority_never_jumps_another_user(self):
        blockers = self.blockers()
        mine = self.submit("--mem", "70GiB", "--", "true")
        r = self.as_alice("submit", "--json", "--mem", "70GiB", "--priority", "10000", "--",
                          "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        hers = int(json.loads(r.stdout)["job"])
        plain = int(json.loads(self.as_alice("submit", "--json", "--mem", "70GiB", "--",
                                             "true").stdout)["job"])
        # Fair share puts alice, who has used nothing, before root, whose jobs hold the GPUs;
        # her --priority orders her own jobs and adds nothing to where she stands.
        mine_e, hers_e, plain_e = (self.colo_json("explain", j) for j in (mine, hers, plain))
        self.assertEqual([hers_e["position"], plain_e["position"], mine_e["position"]], [1, 2, 3])
        self.assertAlmostEqual(hers_e["priority"], plain_e["priority"], delta=10)
        for _, release in blockers:
            self.release(release)
        for job in (mine, hers, plain):
            self.assert_succeeded(job)

    def test_output_files_are_opened_as_the_job_s_user(self):
        """-o naming root's file, directly or through a link in the user's directory: the file
        is opened as the user, so the job fails and the file is untouched."""
        victim = os.path.join(self.tmp, "roots-file")
        self.write(victim, "root's\n", 0o644)
        link = os.path.join(self.alice_work, "link")
        os.symlink(victim, link)
        for target in (victim, "link"):
            r = self.as_alice("submit", "--json", "-o", target, "--", "sh", "-c", "echo pwned")
            job = json.loads(r.stdout)["job"]
            detail = self.wait_state(job, TERMINAL, user=self.alice)
            self.assertEqual(detail["state"], "failed")
            err = self.colo("logs", "--stderr", job, user=self.alice, cwd=self.alice_work).stdout
            self.assertIn("Permission denied", err)
        with open(victim) as f:
            self.assertEqual(f.read(), "root's\n")

    def test_filters_cancel_only_ones_own_jobs(self):
        mine = self.submit("--hold", "--name", "same", "--", "true")
        r = self.as_alice("submit", "--json", "--hold", "--name", "same", "--", "true")
        hers = int(json.loads(r.stdout)["job"])
        r = self.as_alice("cancel", "--name", "same")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"job {hers}: cancelled\n")
        self.assertEqual(self.show(mine)["state"], "queued")
        r = self.as_alice("cancel", mine)
        self.assertEqual(r.returncode, 1)
        self.assertIn("only its owner or root", r.stderr)
        r = self.as_alice("hold", mine)
        self.assertEqual(r.returncode, 1)
        self.assertIn("only its owner or root", r.stderr)
        self.colo_ok("cancel", "--user", "root", "--name", "same")
        self.assertEqual(self.show(mine)["state"], "cancelled")


if __name__ == "__main__":
    harness.main()
