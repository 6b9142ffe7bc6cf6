#!/usr/bin/env python3
"""colod under faults, through the real binaries: a full disk, a read-only state file system,
two daemons on one state directory, corrupted and lost database rows, kill -9 at random moments,
and garbage on its socket. What is acknowledged is never lost and never run twice; colod keeps
serving.

The tests that mount file systems need root; they are skipped without it.
"""

import errno
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import harness
from harness import wait_until

TERMINAL = {"succeeded", "failed", "cancelled", "lost"}
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


class FaultTest(harness.E2ETest):
    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.write(os.path.join(self.bin, "wait-for"), WAIT_SCRIPT, 0o755)
        self.work = self.mkdir("work")

    def colo(self, *args, **kwargs):
        kwargs.setdefault("cwd", self.work)
        kwargs.setdefault("path_prefix", self.bin)
        return super().colo(*args, **kwargs)

    def try_submit(self, d, *args):
        """colo submit: (job id or None, the CompletedProcess)."""
        r = self.colo("submit", "--json", *args, daemon=d, timeout=60)
        if r.returncode == 0:
            return int(json.loads(r.stdout)["job"]), r
        return None, r

    def all_jobs(self, d):
        """Every job colod knows, live and ended, by id (ids must not repeat)."""
        jobs = self.colo_json("queue", daemon=d)["jobs"]
        jobs += self.colo_json("history", "--all", "--limit", "100000", daemon=d)["jobs"]
        ids = [j["id"] for j in jobs]
        self.assertEqual(len(ids), len(set(ids)), f"a job is listed twice: {sorted(ids)}")
        return {j["id"]: j for j in jobs}

    def wait_all_ended(self, d, deadline=harness.JOB_DEADLINE):
        wait_until(lambda: not self.colo_json("queue", daemon=d)["jobs"], deadline,
                   "every job to end")


def fill(directory):
    """Fills the file system of `directory` with a filler file; its path."""
    path = os.path.join(directory, "filler")
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            block = b"\0" * size
            try:
                while True:
                    f.write(block)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    return path


class Storage(FaultTest):
    def state_on(self, fs):
        return os.path.join(fs, "state")

    def check_restart_keeps_acknowledged(self, d, acknowledged, refused_count):
        """After a restart every acknowledged job is there once, and nothing else is."""
        self.assertEqual(d.stop(), 0)
        d.start()
        jobs = self.all_jobs(d)
        self.assertEqual(sorted(jobs), sorted(acknowledged),
                         f"{refused_count} submit(s) were refused")
        for job in acknowledged:
            self.assertEqual(self.show(job, daemon=d)["state"], "succeeded")

    def test_full_disk(self):
        """The state directory on a full file system: `colo submit` fails saying the job was not
        stored, colod keeps running; with space again it takes work, and after a restart every
        acknowledged job is there once and none that was refused."""
        fs = self.mount_tmpfs("fs", "8m")
        # No room kept for the database: the disk is full for it too (the reserve's own test is
        # test_multi_user's).
        d = self.colod(state_dir=self.state_on(fs), config={"limits": {"database_reserve": "none"}})
        acknowledged = []
        first, _ = self.try_submit(d, "--", "true")
        self.assertIsNotNone(first)
        acknowledged.append(first)
        self.assert_succeeded(first, daemon=d)
        # Both GPUs taken, so that what is submitted on the full disk waits instead of starting.
        release = os.path.join(self.work, "release")
        for _ in range(2):
            job, r = self.try_submit(d, "--mem", "70GiB", "--", "wait-for", release)
            self.assertIsNotNone(job, r.stderr)
            acknowledged.append(job)
            self.wait_state(job, "running", daemon=d)
        filler = fill(fs)
        refused = None
        for _ in range(50):  # the WAL may have room for a few before the disk says no
            job, r = self.try_submit(d, "--mem", "70GiB", "--name", "on-full-disk", "--", "true")
            if job is None:
                refused = r
                break
            acknowledged.append(job)
        self.assertIsNotNone(refused, "no submit failed on a full disk")
        self.assertEqual(refused.returncode, 1)
        self.assertIn("could not be stored, so it was not submitted", harness.error_message(refused))
        self.assertTrue(d.alive())
        self.colo_ok("queue", daemon=d)
        # Jobs that end on the full disk: their ends are kept in memory and stored later.
        self.write(release, "")
        for job in acknowledged[1:3]:
            self.assert_succeeded(job, daemon=d)
        wait_until(lambda: "could not store the job's latest change" in d.current_log(), 10,
                   "colod to say it keeps an unstored change")
        os.unlink(filler)
        wait_until(lambda: "stored again" in d.current_log(), 10,
                   "colod to store the kept changes")
        job, r = self.try_submit(d, "--", "true")
        self.assertIsNotNone(job, r.stderr)
        acknowledged.append(job)
        for job in acknowledged:
            self.assert_succeeded(job, daemon=d)
        self.check_restart_keeps_acknowledged(d, acknowledged, 1)

    def test_read_only_state(self):
        """A read-only state file system: the kernel refuses `mount -o remount,ro` under a
        running colod (its database is open for writing), and a colod started on it refuses to
        start with a message; writable again, it starts with every acknowledged job."""
        fs = self.mount_tmpfs("fs", "16m")
        d = self.colod(state_dir=self.state_on(fs))
        job, r = self.try_submit(d, "--", "true")
        self.assertIsNotNone(job, r.stderr)
        self.assert_succeeded(job, daemon=d)
        remount = subprocess.run(["mount", "-o", "remount,ro", fs], capture_output=True,
                                 text=True)
        if remount.returncode == 0:
            # A kernel that allows it: colod must behave as on a full disk.
            refused, r = self.try_submit(d, "--", "true")
            self.assertIsNone(refused, "a submit was acknowledged on a read-only state")
            self.assertIn("could not be stored, so it was not submitted", harness.error_message(r))
            self.assertTrue(d.alive())
            self.colo_ok("queue", daemon=d)
            subprocess.run(["mount", "-o", "remount,rw", fs], check=True)
        else:
            self.assertEqual(d.stop(), 0)
            subprocess.run(["mount", "-o", "remount,ro", fs], check=True, capture_output=True)
            d.spawn()
            self.assertEqual(d.proc.wait(harness.START_DEADLINE), 1)
            log = d.current_log()
            self.assertIn(d.state_dir, log)
            self.assertIn("Read-only file system", log)
            subprocess.run(["mount", "-o", "remount,rw", fs], check=True)
            d.start()
        self.assertEqual(self.show(job, daemon=d)["state"], "succeeded")
        later, r = self.try_submit(d, "--", "true")
        self.assertIsNotNone(later, r.stderr)
        self.assert_succeeded(later, daemon=d)
        self.check_restart_keeps_acknowledged(d, [job, later], 0)


OOM_AFTER_RELEASE = """#!/bin/sh
# Attempt 1 waits for $1, then crashes out of GPU memory as PyTorch reports it; later ones pass.
if [ "$COLO_ATTEMPT" = 1 ]; then
  wait-for "$1"
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2
  exit 1
fi
echo "attempt $COLO_ATTEMPT ok"
"""


class Restart(FaultTest):
    def job_alive(self, job):
        return bool(harness.processes_with_token(self.token, f"COLO_JOB_ID={job}\0"))

    def restart_with_running_jobs(self, kill):
        d = self.colod()
        rel = {name: os.path.join(self.work, f"release-{name}") for name in "abc"}
        a, _ = self.try_submit(d, "--mem", "70GiB", "--", "wait-for", rel["a"])
        b, _ = self.try_submit(d, "--mem", "70GiB", "--", "wait-for", rel["b"])
        for job in (a, b):
            self.wait_state(job, "running", daemon=d)
        c, _ = self.try_submit(d, "--mem", "70GiB", "--", "sh", "-c", "exit 3")
        self.assertEqual(self.show(c, daemon=d)["state"], "queued")
        if kill:
            d.kill9()
        else:
            self.assertEqual(d.stop(), 0)
        self.assertTrue(self.job_alive(a) and self.job_alive(b), "jobs ended with colod")
        self.write(rel["a"], "")  # a ends while colod is down
        wait_until(lambda: not self.job_alive(a), 10, "job a to end")
        d.start()
        self.assertEqual(self.wait_state(a, TERMINAL, daemon=d)["state"], "succeeded")
        detail = self.show(b, daemon=d)
        self.assertEqual(detail["state"], "running")
        self.assertIn("adopted", [e["kind"] for e in detail["events"]])
        detail = self.wait_state(c, TERMINAL, daemon=d)
        self.assertEqual((detail["state"], detail["reason"][:11]), ("failed", "exit code 3"))
        self.assertEqual(self.colo_json("cancel", b, daemon=d)["state"], "cancelling")
        self.assertEqual(self.wait_state(b, TERMINAL, daemon=d)["state"], "cancelled")
        self.assertFalse(self.job_alive(b), "a cancelled, re-adopted job still runs")
        self.assertEqual(sorted(self.all_jobs(d)), [a, b, c])

    def test_sigterm_and_restart(self):
        """colod stopped with SIGTERM while jobs run: they keep running; one that ends while
        colod is down is read from its exit record, the other is re-adopted (and can be
        cancelled), and the queued job keeps its place."""
        self.restart_with_running_jobs(kill=False)

    def test_kill_9_and_restart(self):
        """The same after kill -9."""
        self.restart_with_running_jobs(kill=True)

    def test_recovering_job_keeps_priority_retries_and_numbering(self):
        """A job waiting to be recovered from an out-of-memory crash, across a kill -9: it is
        still recovering, goes before a job of the main queue, and its next attempt is 2."""
        d = self.colod()
        script = self.write(os.path.join(self.bin, "oom-after"), OOM_AFTER_RELEASE, 0o755)
        release_a, release_x = (os.path.join(self.work, n) for n in ("release-a", "release-x"))
        a, _ = self.try_submit(d, "--mem", "74GiB", "--", "wait-for", release_a)
        self.wait_state(a, "running", daemon=d)
        x, _ = self.try_submit(d, "--mem", "4GiB", "--", script, release_x)
        self.wait_state(x, "running", daemon=d)
        b, _ = self.try_submit(d, "--mem", "74GiB", "--", "wait-for", release_a)
        self.wait_state(b, "running", daemon=d)
        self.write(release_x, "")
        detail = self.wait_state(x, "recovering", daemon=d)
        self.assertEqual(detail["oom_count"], 1)
        main, _ = self.try_submit(d, "--mem", "5GiB", "--", "true")
        self.assertEqual(self.colo_json("explain", x, daemon=d)["queue"], "recovery")
        d.kill9()
        d.start()
        detail = self.show(x, daemon=d)
        self.assertEqual((detail["state"], detail["oom_count"]), ("recovering", 1))
        self.assertEqual(self.show(main, daemon=d)["state"], "queued")
        self.write(release_a, "")
        x_detail = self.assert_succeeded(x, daemon=d)
        main_detail = self.assert_succeeded(main, daemon=d)
        self.assertEqual([(t["number"], t["exit_kind"]) for t in x_detail["attempt_list"]],
                         [(1, "out-of-memory"), (2, "success")])
        self.assertLessEqual(x_detail["attempt_list"][1]["started"],
                             main_detail["attempt_list"][0]["started"])
        self.assertEqual(self.colo_ok("logs", x, daemon=d).stdout, "attempt 2 ok\n")


class TwoDaemons(FaultTest):
    def test_second_colod_on_one_state_directory(self):
        """A second colod on the first one's state directory exits non-zero naming the first
        (its pid), whether it is given the same socket or another, and the first one's socket
        keeps working."""
        first = self.colod()
        job, release = self.running(first)
        for socket_path in (first.socket, os.path.join(self.tmp, "second.sock")):
            with self.subTest(socket=socket_path):
                second = self.colod(start=False, state_dir=first.state_dir,
                                    socket_path=socket_path)
                second.spawn()
                self.assertNotEqual(second.proc.wait(harness.START_DEADLINE), 0)
                log = second.current_log()
                self.assertIn(f"another colod (pid {first.proc.pid})", log)
                self.assertIn(first.state_dir, log)
                self.assertTrue(os.path.exists(first.socket))
                self.assertEqual(self.show(job, daemon=first)["state"], "running")
        self.write(release, "")
        self.assert_succeeded(job, daemon=first)

    def test_second_colod_on_one_socket(self):
        """A second colod with its own state directory but the first one's socket: refused, and
        the first one keeps its socket."""
        first = self.colod()
        second = self.colod(start=False, state_dir=os.path.join(self.tmp, "state2"),
                            socket_path=first.socket)
        second.spawn()
        self.assertNotEqual(second.proc.wait(harness.START_DEADLINE), 0)
        self.assertIn("another colod is serving", second.current_log())
        self.colo_ok("queue", daemon=first)

    def test_two_colods_side_by_side(self):
        """Two colods on their own state directories, started from one place (one cgroup):
        each runs its own job 1 and neither fails, takes or ends the other's."""
        first = self.colod()
        second = self.colod(state_dir=os.path.join(self.tmp, "state2"),
                            socket_path=os.path.join(self.tmp, "second.sock"))
        job, release = self.running(first)
        other, r = self.try_submit(second, "--", "sh", "-c", "echo second")
        self.assertEqual((job, other), (1, 1), r.stderr)
        self.assert_succeeded(other, daemon=second)
        self.assertEqual(self.show(job, daemon=first)["state"], "running")
        again, release2 = self.running(second)
        self.write(release, "")
        self.assert_succeeded(job, daemon=first)
        self.assertEqual(self.show(again, daemon=second)["state"], "running")
        self.write(release2, "")
        self.assert_succeeded(again, daemon=second)

    def running(self, d):
        release = os.path.join(self.work, f"release-{time.monotonic_ns()}")
        job, r = self.try_submit(d, "--", "wait-for", release)
        self.assertIsNotNone(job, r.stderr)
        self.wait_state(job, "running", daemon=d)
        return job, release


class Database(FaultTest):
    def db(self, d):
        return sqlite3.connect(os.path.join(d.state_dir, "colo.db"), timeout=10)

    def test_corrupted_rows_are_quarantined(self):
        """Garbage in one queued job's record and in one ended job's (written while colod is
        stopped): colod starts, names the queued one as quarantined in its log, re-adopts and
        finishes the running job, refuses to show the broken ones with a message, and takes new
        work with ids above every old one."""
        d = self.colod()
        done, _ = self.try_submit(d, "--name", "done", "--", "true")
        broken_done, _ = self.try_submit(d, "--name", "broken-done", "--", "true")
        for job in (done, broken_done):
            self.assert_succeeded(job, daemon=d)
        release = os.path.join(self.work, "release")
        blockers = [self.try_submit(d, "--mem", "70GiB", "--", "wait-for", release)[0]
                    for _ in range(2)]
        for job in blockers:
            self.wait_state(job, "running", daemon=d)
        queued, _ = self.try_submit(d, "--mem", "70GiB", "--name", "queued", "--", "true")
        other, _ = self.try_submit(d, "--mem", "70GiB", "--name", "other", "--", "true")
        self.assertEqual(self.show(queued, daemon=d)["state"], "queued")
        self.assertEqual(d.stop(), 0)
        with self.db(d) as db:
            db.execute("UPDATE jobs SET record = ? WHERE id = ?", ("{garbage", queued))
            db.execute("UPDATE jobs SET record = ? WHERE id = ?",
                       ('{"spec": {"id": "not a number"}}', broken_done))
        d.start()
        log = d.current_log()
        self.assertRegex(log, rf"job {queued} quarantined: ")
        for job in blockers:
            self.assertEqual(self.show(job, daemon=d)["state"], "running")
        for job in (queued, broken_done):
            r = self.colo("show", job, daemon=d)
            self.assertEqual(r.returncode, 1)
            self.assertIn(f"job {job}", r.stderr)
        queue = [j["id"] for j in self.colo_json("queue", daemon=d)["jobs"]]
        self.assertEqual(sorted(queue), sorted(blockers + [other]))
        history = [j["id"] for j in self.colo_json("history", daemon=d)["jobs"]]
        self.assertEqual(history, [done])
        self.write(release, "")
        for job in blockers + [other]:
            self.assert_succeeded(job, daemon=d)
        new, r = self.try_submit(d, "--", "true")
        self.assertIsNotNone(new, r.stderr)
        self.assertGreater(new, other)
        self.assert_succeeded(new, daemon=d)
        self.assertTrue(d.alive())

    def lose_counter(self, sql):
        d = self.colod()
        old = [self.try_submit(d, "--name", f"old{i}", "--", "true")[0] for i in range(3)]
        for job in old:
            self.assert_succeeded(job, daemon=d)
        before = {j: self.show(j, daemon=d) for j in old}
        self.assertEqual(d.stop(), 0)
        with self.db(d) as db:
            db.execute(sql)
        d.start()
        new, r = self.try_submit(d, "--name", "new", "--", "true")
        self.assertIsNotNone(new, r.stderr)
        self.assertGreater(new, max(old))
        self.assert_succeeded(new, daemon=d)
        for job in old:
            after = self.show(job, daemon=d)
            for key in ("name", "state", "command", "submitted", "finished", "attempt_list"):
                self.assertEqual(after[key], before[job][key], f"job {job}: {key}")
        self.assertEqual(sorted(self.all_jobs(d)), sorted(old + [new]))

    def test_lost_id_counter(self):
        """The id counter deleted: new ids are above every old one, old jobs are intact."""
        self.lose_counter("DELETE FROM meta WHERE key = 'next_job_id'")

    def test_id_counter_gone_back(self):
        """The id counter set back to 1 (or to garbage): the same."""
        self.lose_counter("UPDATE meta SET value = '1' WHERE key = 'next_job_id'")

    def test_id_counter_garbage(self):
        """The id counter made garbage: the same."""
        self.lose_counter("UPDATE meta SET value = 'x' WHERE key = 'next_job_id'")


class KillNine(FaultTest):
    ROUNDS = 6

    def test_kill_9_loop(self):
        """colod is killed with SIGKILL at random moments while a client submits jobs (each
        appends "$COLO_JOB_ID $COLO_ATTEMPT" to a log and sleeps a little), and restarted, six
        times; then everything finishes: every acknowledged job succeeded, no job ran twice,
        none was lost. Attempts in cgroups where colod can make them."""
        self.kill_loop({})

    def test_kill_9_loop_without_cgroups(self):
        """The same with cgroups off: attempts found again by their sessions and logs."""
        self.kill_loop({"jobs": {"cgroups": "off"}})

    def kill_loop(self, config):
        seed = int(os.environ.get("COLO_E2E_SEED", time.time_ns() % 100000))
        print(f"kill -9 loop seed {seed} (COLO_E2E_SEED to repeat)")
        rng = random.Random(seed)
        log = os.path.join(self.work, "jobs.log")
        d = self.colod(start=False, config=dict(config, limits={"idle_timeout": "60s"}))
        acknowledged, failures = [], []
        stop = threading.Event()

        errors = []

        def client():
            try:
                while not stop.is_set():
                    r = self.colo("submit", "--json", "--mem", "1GiB", "--", "sh", "-c",
                                  'echo "$COLO_JOB_ID $COLO_ATTEMPT" >> jobs.log; sleep 0.2',
                                  daemon=d, timeout=60)
                    if r.returncode == 0:
                        acknowledged.append(int(json.loads(r.stdout)["job"]))
                    else:
                        failures.append(r.stderr.strip())
                        time.sleep(0.05)
            except BaseException as e:  # reported by the test, not lost with the thread
                errors.append(e)
                raise

        thread = threading.Thread(target=client, daemon=True)
        try:
            for round_ in range(self.ROUNDS):
                d.start()
                if round_ == 0:
                    thread.start()
                count = len(acknowledged)
                wait_until(lambda: len(acknowledged) > count or errors, 15,
                           "a submit to be acknowledged")
                self.assertEqual(errors, [])
                time.sleep(rng.uniform(0.05, 1.0))  # the random moment of the kill
                d.kill9()
            d.start()
            time.sleep(0.5)
        finally:
            stop.set()
            thread.join(60)
        self.assertFalse(thread.is_alive())
        self.assertEqual(errors, [])
        self.wait_all_ended(d, deadline=60)
        jobs = self.all_jobs(d)
        lost = [j for j in acknowledged if j not in jobs]
        self.assertEqual(lost, [], "acknowledged jobs were lost")
        not_ok = {j: jobs[j]["state"] for j in acknowledged if jobs[j]["state"] != "succeeded"}
        self.assertEqual(not_ok, {}, "acknowledged jobs that did not succeed")
        with open(log) as f:
            runs = [line.split() for line in f if line.strip()]
        ran = [int(job) for job, _ in runs]
        twice = sorted({j for j in ran if ran.count(j) > 1})
        self.assertEqual(twice, [], "jobs that ran twice")
        self.assertTrue(set(acknowledged) <= set(ran), "acknowledged jobs that never ran")
        self.assertTrue(all(attempt == "1" for _, attempt in runs), runs)
        print(f"{len(acknowledged)} acknowledged, {len(jobs)} stored, {len(failures)} refused "
              f"while colod was down")


class LostReply(FaultTest):
    """A submit whose reply is lost (a proxy in front of colod closes the connection instead of
    passing the reply on): the client sends it again with the same token, and colod answers with
    the job it stored; the job runs once."""

    def setUp(self):
        super().setUp()
        self.d = self.colod()
        self.proxy = harness.ReplyDroppingProxy(self.d.socket, os.path.join(self.tmp, "proxy"))
        self.addCleanup(self.proxy.close)
        self.runs = os.path.join(self.work, "runs")

    def job_count(self):
        jobs = self.colo_json("queue", daemon=self.d)["jobs"]
        return len(jobs) + len(self.colo_json("history", "--all", daemon=self.d)["jobs"])

    def test_colo_submit_sends_it_again_and_the_job_runs_once(self):
        r = self.colo("submit", "--json", "--", "sh", "-c", f"echo ran >> {self.runs}",
                      env=self.client_env(socket_path=self.proxy.path, path_prefix=self.bin))
        self.assertEqual(r.returncode, 0, r.stderr)
        job = int(json.loads(r.stdout)["job"])
        self.assertEqual((self.proxy.dropped, self.proxy.submits), (1, 2))
        self.assert_succeeded(job, daemon=self.d)
        with open(self.runs) as f:
            self.assertEqual(f.read(), "ran\n")
        self.assertEqual(self.job_count(), 1)

    def test_an_array_sent_again_is_one_array(self):
        r = self.colo("submit", "--json", "--array", "0-3", "--", "sh", "-c",
                      f"echo $COLO_ARRAY_TASK_ID >> {self.runs}",
                      env=self.client_env(socket_path=self.proxy.path, path_prefix=self.bin))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.proxy.dropped, 1)
        wait_until(lambda: not self.colo_json("queue", daemon=self.d)["jobs"], harness.JOB_DEADLINE,
                   "the array to end")
        with open(self.runs) as f:
            self.assertEqual(sorted(f.read().split()), ["0", "1", "2", "3"])
        self.assertEqual(self.job_count(), 4)

    def test_the_python_client_sends_it_again_and_the_job_runs_once(self):
        sys.path.insert(0, os.path.join(harness.BIN_DIR, "..", "python"))
        import colo  # noqa: E402
        client = colo.Client(self.proxy.path, colo_binary=harness.COLO)
        job = client.submit(["sh", "-c", f"echo ran >> {self.runs}"], workdir=self.work,
                            env=self.client_env())
        self.assertEqual((self.proxy.dropped, self.proxy.submits), (1, 2))
        self.assert_succeeded(job, daemon=self.d)
        with open(self.runs) as f:
            self.assertEqual(f.read(), "ran\n")
        self.assertEqual(self.job_count(), 1)

    def test_a_token_outlives_a_restart(self):
        """The token is stored with the job: the same submit after a restart of colod still
        gets its job, and without a token it would be a second one."""
        [s] = harness.connect_as(self.d.socket)
        submit = {"api": 1, "op": "submit", "command": ["true"], "workdir": self.work,
                  "env": ["PATH=/usr/bin:/bin"], "token": "retry-after-restart"}
        with s:
            first = harness.request(s, submit)["job"]
        self.d.kill9()
        self.d.start()
        [s] = harness.connect_as(self.d.socket)
        with s:
            self.assertEqual(harness.request(s, submit)["job"], first)
            del submit["token"]
            self.assertNotEqual(harness.request(s, submit)["job"], first)


class Garbage(FaultTest):
    def setUp(self):
        super().setUp()
        self.d = self.colod()

    def connect(self):
        [s] = harness.connect_as(self.d.socket)
        return s

    def assert_serving(self):
        self.assertTrue(self.d.alive(), self.d.log())
        with self.connect() as s:
            reply = harness.request(s, {"api": 1, "op": "hello"})
        self.assertTrue(reply and reply["ok"], reply)

    def test_malformed_requests_get_errors(self):
        """Wrong API version types, unknown ops, missing and wrong fields, random bytes: each
        gets an error naming the problem on the same connection, and colod serves on."""
        cases = [
            (b'{"api":"1","op":"hello"}\n', "failed_precondition", "API version"),
            (b'{"op":"hello"}\n', "failed_precondition", "API version"),
            (b'{"api":1}\n', "invalid_argument", "op"),
            (b'{"api":1,"op":"launch-missiles"}\n', "invalid_argument", "unknown op"),
            (b'{"api":1,"op":"show"}\n', "invalid_argument", "job"),
            (b'{"api":1,"op":"show","job":-1}\n', "invalid_argument", "job"),
            (b'{"api":1,"op":"show","job":1e999}\n', "invalid_argument", ""),
            (b'{"api":1,"op":"submit","command":[]}\n', "invalid_argument", "command"),
            (b'{"api":1,"op":"submit","command":"ls"}\n', "invalid_argument", "command"),
            (b'{"api":1,"op":"history","limit":100000000}\n', "invalid_argument", "limit"),
            # A misspelled option is refused by name, not taken as its default.
            (b'{"api":1,"op":"submit","command":["true"],"workdir":"/","requeu":true}\n',
             "invalid_argument", "requeu: is not a field of this request"),
            (b'{"api":1,"op":"queue","pagee":2}\n', "invalid_argument", "pagee: is not a field"),
            # An echoed key is cut, also inside a character.
            (b'{"api":1,"op":"hello","' + b"k" * 63 + "\u00e9".encode() + b'":1}\n',
             "invalid_argument", "is not a field"),
            (b"[1,2,3]\n", "invalid_argument", "not a JSON object"),
            (b"\xff\xfe\x00garbage\n", "invalid_argument", ""),
            (b"\n", "invalid_argument", ""),
            (b"[" * 200000 + b"]" * 200000 + b"\n", "invalid_argument", ""),
            (b'{"a":' * 100000 + b"1" + b"}" * 100000 + b"\n", "failed_precondition", ""),
        ]
        with self.connect() as s:
            for line, code, words in cases:
                with self.subTest(line=line[:60]):
                    reply = harness.request(s, line)
                    self.assertIsNotNone(reply, "colod closed the connection")
                    self.assertFalse(reply["ok"])
                    self.assertEqual(reply["code"], code, reply)
                    self.assertIn(words, reply["error"])
            self.assertTrue(harness.request(s, {"api": 1, "op": "hello"})["ok"])
        self.assert_serving()

    def submit_line(self, **fields):
        request = {"api": 1, "op": "submit", "command": ["true"], "workdir": self.work,
                   "env": ["PATH=" + harness.SYSTEM_PATH, self.token]}
        request.update(fields)
        return json.dumps(request).encode() + b"\n"

    def test_malformed_submits(self):
        """Submits with NUL bytes, bad environment entries, relative or missing working
        directories, oversized names: refused naming the field, nothing stored; a name that is
        not valid UTF-8 is refused too; a good one after them is the only job stored."""
        cases = [
            (self.submit_line(command=["tr\0ue"]), "command"),
            (self.submit_line(command=[""]), "command"),
            (self.submit_line(env=["NOEQUALS"]), "env"),
            (self.submit_line(env=["=x"]), "env"),
            (self.submit_line(env=["A=\0"]), "env"),
            (self.submit_line(workdir="relative/dir"), "workdir"),
            (self.submit_line(workdir=self.work + "/\0x"), "workdir"),
            (self.submit_line(workdir=""), "workdir"),
            (self.submit_line(name="n" * 2000), "name"),
            (self.submit_line(gpus=0), "gpus"),
            (self.submit_line(memory=-5), "memory"),
            (self.submit_line(threads=101), "threads"),
        ]
        with self.connect() as s:
            for line, field in cases:
                with self.subTest(line=line[:80]):
                    reply = harness.request(s, line)
                    self.assertIsNotNone(reply)
                    self.assertFalse(reply["ok"], reply)
                    self.assertIn(field, reply["error"])
            raw = self.submit_line(name="PLACEHOLDER").replace(b"PLACEHOLDER", b"bad\xff\xfename")
            reply = harness.request(s, raw)
            self.assertEqual(reply["code"], "invalid_argument", "invalid UTF-8 was accepted")
            reply = harness.request(s, self.submit_line(name="good"))
            self.assertTrue(reply["ok"], reply)
            job = reply["job"]
        self.assertEqual(self.assert_succeeded(job, daemon=self.d)["name"], "good")
        self.assertEqual(sorted(self.all_jobs(self.d)), [job])
        self.assert_serving()

    def test_random_bytes(self):
        """Random bytes (seeded) on many connections, some cut off mid-line: colod never ends."""
        rng = random.Random(1234)
        for _ in range(30):
            with self.connect() as s:
                data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 20000)))
                try:
                    s.sendall(data)
                    if rng.random() < 0.5:
                        s.sendall(b"\n")
                        harness.read_line(s, deadline=10)
                except OSError:
                    pass
        self.assert_serving()

    def test_oversized_line(self):
        """A line above limits.max_request_bytes (1 MiB) gets "too_large" and the connection is
        closed; colod serves on."""
        with self.connect() as s:
            payload = b'{"api":1,"op":"submit","command":["' + b"a" * (2 << 20)
            try:
                s.sendall(payload)
            except OSError:
                pass
            reply = harness.read_line(s, deadline=10)
            self.assertTrue(reply, "no reply to an oversized request")
            self.assertEqual(json.loads(reply)["code"], "too_large")
            self.assertEqual(harness.read_line(s, deadline=10), b"")
        self.assert_serving()

    def test_client_that_never_reads(self):
        """A client that pipelines requests and never reads: colod stops reading it, serves
        others meanwhile, and does not grow without bound."""
        hog = self.connect()
        hog.setblocking(False)
        line = b'{"api":1,"op":"gpus"}\n' * 1000
        sent, blocked_since = 0, None
        end = time.monotonic() + 20 * harness.SLOWER
        while time.monotonic() < end:  # until colod has stopped reading it for a second
            try:
                sent += hog.send(line)
                blocked_since = None
            except BlockingIOError:
                blocked_since = blocked_since or time.monotonic()
                if time.monotonic() - blocked_since > 1:
                    break
                time.sleep(0.05)
        self.assertIsNotNone(blocked_since, "colod kept reading a client that never reads")
        self.assertGreater(sent, 0)
        began = time.monotonic()
        self.assert_serving()
        self.colo_ok("queue", daemon=self.d)
        self.assertLess(time.monotonic() - began, 5)
        with open(f"/proc/{self.d.proc.pid}/status") as f:
            rss_kib = int(next(line for line in f if line.startswith("VmRSS")).split()[1])
        # A sanitized colod also holds freed blocks in ASan's quarantine (256 MiB by default) and
        # shadow memory beside what it uses; the unsanitized build is held to 200 MiB.
        limit_mib = 200 + (512 if harness.SANITIZED else 0)
        self.assertLess(rss_kib, limit_mib * 1024, "colod grew for a client that does not read")
        hog.close()
        self.assert_serving()

    def test_pipelined_requests_are_all_answered(self):
        """A client that sends many requests at once and then reads gets every reply, also when
        the replies outgrow what colod keeps unsent and the requests are already buffered."""
        count = 5000
        with self.connect() as s:
            s.settimeout(20)
            sender = threading.Thread(target=s.sendall,
                                      args=(b'{"api":1,"op":"gpus"}\n' * count,), daemon=True)
            sender.start()
            replies = 0
            data = b""
            end = time.monotonic() + 20 * harness.SLOWER
            while replies < count and time.monotonic() < end:
                s.settimeout(max(0.1, end - time.monotonic()))
                try:
                    chunk = s.recv(1 << 20)
                except socket.timeout:
                    break
                if not chunk:
                    break
                data += chunk
                replies += chunk.count(b"\n")
            sender.join(20)
            self.assertEqual(replies, count)
        self.assert_serving()


if __name__ == "__main__":
    harness.main()
