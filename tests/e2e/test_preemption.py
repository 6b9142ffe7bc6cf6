#!/usr/bin/env python3
"""Preemption with checkpoint signals, through the real programs (docs/admin.md, "Preemption";
docs/user-guide.md, "Preemptible jobs"; examples/preemptible): Alice fills both GPUs with jobs
submitted --requeue; Bob, under his share, waits past fairness.preempt_after; one of Alice's jobs
gets its --signal, saves its checkpoint and exits, is queued again, Bob's job runs, and Alice's
job completes from its checkpoint with COLO_RESTART_COUNT=1. A job that ignores its signal is
killed when its notice is over and requeued all the same. And kill -9 of colod, 20 times, while
preemptions are under way: every job ends once, none is lost, no two attempts of a job run at
once.

Needs root and the users colo-alice and colo-bob (CI makes them; .ci/run). Skipped (77) without.
"""

import json
import os
import random
import re
import shutil
import time

import harness
from harness import wait_until
from test_multi_user import ALICE, BOB, MultiUserTest

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "preemptible", "train.py")
EXCLUSIVE = ("--share", "exclusive")
TERMINAL = {"succeeded", "failed", "cancelled", "lost", "timeout"}

# Logs each attempt's start and end (job, attempt, restart count, time) to the file in $1, then
# runs the rest of its arguments. colod signals every process of the job: the shell waits for its
# command rather than ends at the signal.
LOGGED = """#!/bin/sh
trap ':' TERM USR1
log="$1"; shift
echo "start $COLO_JOB_ID $COLO_ATTEMPT $COLO_RESTART_COUNT $(date +%s.%N)" >> "$log"
"$@"
code=$?
echo "end $COLO_JOB_ID $COLO_ATTEMPT $COLO_RESTART_COUNT $(date +%s.%N)" >> "$log"
exit $code
"""

# Ignores SIGTERM on its first run (it must be killed), and ends at once on its second.
STUBBORN = """#!/bin/sh
echo "run $COLO_RESTART_COUNT"
if [ "$COLO_RESTART_COUNT" = 0 ]; then
  trap '' TERM
  echo "ignoring TERM"
  i=0
  while [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
  exit 4
fi
"""


class PreemptionTest(MultiUserTest):
    config = {"limits": {"max_clients_per_user": 8},
              "fairness": {"preempt_after": "2s"}}

    def setUp(self):
        super().setUp()
        shutil.copy(EXAMPLE, os.path.join(self.bin, "train.py"))
        os.chmod(os.path.join(self.bin, "train.py"), 0o755)
        self.write(os.path.join(self.bin, "logged"), LOGGED, 0o755)
        self.write(os.path.join(self.bin, "stubborn"), STUBBORN, 0o755)

    def events(self, user, job, kind):
        return [e for e in self.show_as(user, job)["events"] if e["kind"] == kind]

    def output(self, user, name):
        with open(os.path.join(self.work[user.name], name)) as f:
            return f.read()


class PreemptedJobResumes(PreemptionTest):
    def test_signal_checkpoint_requeue_and_completion(self):
        """Alice's two --requeue jobs hold both GPUs; Bob's job waits 2 s under his share, so the
        later of Alice's gets SIGUSR1, saves its checkpoint and exits; it waits again while Bob's
        job runs, then completes from its checkpoint as attempt 2 with COLO_RESTART_COUNT=1."""
        jobs = [self.submit_as(ALICE, *EXCLUSIVE, "--requeue", "--signal", "USR1@30",
                               "-o", f"train-{i}.out", "--", "train.py", "--steps", "60",
                               "--step-seconds", "0.25", "--checkpoint", f"ckpt-{i}.json")
                for i in range(2)]
        for job in jobs:
            self.wait_as(ALICE, job, "running")
        shown = self.as_(ALICE, "show", jobs[0]).stdout
        self.assertIn("Requeue=1 Signal=SIGUSR1@30", shown)
        time.sleep(1)  # both have trained some steps
        bob = self.submit_as(BOB, *EXCLUSIVE, "--", "sh", "-c", "sleep 1")
        self.wait_as(BOB, bob, "succeeded", deadline=60)

        preempted = [j for j in jobs if self.events(ALICE, j, "preempted")]
        self.assertEqual(len(preempted), 1, "one of Alice's jobs makes the room Bob needs")
        victim = preempted[0]
        i = jobs.index(victim)
        (preempting,) = self.events(ALICE, victim, "preempting")
        self.assertIn(f"for job {bob} of {BOB.name}", preempting["detail"])
        self.assertIn("SIGUSR1 to every process of attempt 1", preempting["detail"])
        done = self.wait_as(ALICE, victim, TERMINAL, deadline=90)
        self.assertEqual(done["state"], "succeeded", done)
        first, second = done["attempt_list"]
        self.assertEqual(first["exit_kind"], "preempted", first)
        self.assertIn(f"preempted for job {bob}", first["detail"])
        self.assertEqual(second["exit_kind"], "success", second)
        self.assertEqual(done["oom_count"], 0, "a preemption is no out-of-memory retry")
        self.assertGreaterEqual(second["started"], self.show_as(BOB, bob)["started"],
                                "Bob's job went first")
        out = self.output(ALICE, f"train-{i}.out")
        saved = re.search(r"got SIGUSR1: saved step (\d+)", out)
        self.assertIsNotNone(saved, out)
        self.assertGreater(int(saved.group(1)), 0, out)
        self.assertIn(f"attempt 2, restart 1: resuming at step {saved.group(1)} of 60", out)
        self.assertIn("done: 60 steps", out)
        with open(os.path.join(self.work[ALICE.name], f"ckpt-{i}.json")) as f:
            self.assertEqual(json.load(f)["step"], 60)

        other = self.wait_as(ALICE, jobs[1 - i], TERMINAL, deadline=90)
        self.assertEqual((other["state"], len(other["attempt_list"])), ("succeeded", 1))
        self.assertIn("attempt 1, restart 0: starting", self.output(ALICE, f"train-{1 - i}.out"))
        # colo explain tells the story of the attempt.
        self.assertEqual(self.explain_summary(ALICE, victim), "ended (succeeded)")

    def explain_summary(self, user, job):
        return self.json_as(user, "explain", job)["summary"]

    def test_a_job_that_ignores_its_signal_is_killed_and_requeued(self):
        """--signal TERM@2 to a job that ignores SIGTERM: SIGKILL 2 s later, and it is queued
        again all the same; its second run completes. (A lead of 6 s under the sanitizers, so
        that colo explain, slower there, still finds it being preempted.)"""
        lead = 2 * harness.SLOWER
        alice = [self.submit_as(ALICE, *EXCLUSIVE, "--requeue", "--signal", f"TERM@{lead}", "--",
                                "stubborn") for _ in range(2)]
        for job in alice:
            self.wait_as(ALICE, job, "running")
        bob = self.submit_as(BOB, *EXCLUSIVE, "--", "true")
        victim = wait_until(lambda: next((j for j in alice
                                          if self.events(ALICE, j, "preempting")), None),
                            30, "a preemption to start")
        why = self.json_as(ALICE, "explain", victim)["summary"]
        self.assertIn(f"being preempted for job {bob} of {BOB.name}", why)
        self.assertIn("SIGTERM sent", why)
        self.wait_as(BOB, bob, "succeeded", deadline=60)
        done = self.wait_as(ALICE, victim, TERMINAL, deadline=60)
        self.assertEqual(done["state"], "succeeded", done)
        first = done["attempt_list"][0]
        self.assertEqual(first["exit_kind"], "preempted", first)
        self.assertEqual(first.get("exit_signal"), 9, first)
        self.assertIn("killed by signal 9 after the grace", first["detail"])
        self.assertGreaterEqual(first["ended"] - first["started"], lead)
        self.assertEqual(self.as_(ALICE, "logs", victim).stdout.split()[:2], ["run", "1"])
        for job in alice:
            if job != victim:
                self.as_(ALICE, "cancel", job)

    def test_jobs_not_submitted_requeue_are_never_preempted(self):
        """Without --requeue Alice's jobs run on; Bob waits for them."""
        a, release_a = self.running_job(ALICE, *EXCLUSIVE)
        b, release_b = self.running_job(ALICE, *EXCLUSIVE)
        bob = self.submit_as(BOB, *EXCLUSIVE, "--", "true")
        time.sleep(4 * harness.SLOWER)
        self.assertEqual(self.show_as(BOB, bob)["state"], "queued")
        for job in (a, b):
            self.assertEqual(self.events(ALICE, job, "preempting"), [])
        self.release(release_a)
        self.wait_as(BOB, bob, "succeeded")
        self.release(release_b)
        self.wait_as(ALICE, b, "succeeded")


# On its first run, leaves two writers behind that ignore the job signals (one in a session of
# its own, one under nohup whose parent exits), then exits at SIGUSR1; its second run logs its
# start and end. Every line carries the time it was written.
ESCAPES = """#!/bin/sh
log="$PWD/escape-$COLO_JOB_ID.log"
if [ "$COLO_RESTART_COUNT" = 0 ]; then
  setsid sh -c 'trap "" TERM USR1 HUP; while :; do echo "left $(date +%s.%N)" >> "$0"; sleep 0.1; done' "$log" </dev/null >/dev/null 2>&1 &
  (nohup sh -c 'trap "" TERM USR1 HUP; while :; do echo "left $(date +%s.%N)" >> "$0"; sleep 0.1; done' "$log" </dev/null >/dev/null 2>&1 &)
  trap 'exit 0' USR1
  while :; do sleep 0.1; done
fi
echo "again $(date +%s.%N)" >> "$log"
"""


class PreemptedJobsLeaveNothingBehind(PreemptionTest):
    def test_what_a_preempted_job_left_running_ends_before_its_next_attempt(self):
        """A preempted attempt that exits at its signal but left processes behind (a new
        session, a nohup'd orphan, both deaf to the signal) has them ended before it counts as
        over: nothing of attempt 1 writes once attempt 2 has started."""
        self.write(os.path.join(self.bin, "escapes"), ESCAPES, 0o755)
        alice = [self.submit_as(ALICE, *EXCLUSIVE, "--requeue", "--signal", "USR1@2", "--",
                                "escapes") for _ in range(2)]
        for job in alice:
            self.wait_as(ALICE, job, "running")
        bob = self.submit_as(BOB, *EXCLUSIVE, "--", "sleep", "2")
        self.wait_as(BOB, bob, "succeeded", deadline=60)
        (victim,) = [j for j in alice if self.events(ALICE, j, "preempted")]
        log = os.path.join(self.work[ALICE.name], f"escape-{victim}.log")
        wait_until(lambda: "again" in self.output(ALICE, f"escape-{victim}.log"), 60,
                   "the second attempt to start")
        time.sleep(1)  # what attempt 1 left would have written meanwhile
        with open(log) as f:
            lines = [line.split() for line in f if line.strip()]
        (again,) = [float(t) for what, t in lines if what == "again"]
        left = [float(t) for what, t in lines if what == "left"]
        self.assertTrue(left, "the first attempt's processes ran")
        self.assertLess(max(left), again, "attempt 1's processes wrote after attempt 2 began")
        for job in alice:
            self.as_(ALICE, "cancel", job)


class NoticeCappedByTheServer(PreemptionTest):
    config = {"limits": {"max_clients_per_user": 8},
              "fairness": {"preempt_after": "1s", "max_notice": "3s"}}

    def test_a_job_asking_the_longest_notice_gets_the_servers_most(self):
        """--signal TERM@65535 on jobs that ignore SIGTERM: were the job's 18 h lead its notice,
        Bob would wait 18 h, and so would every preemption for him. fairness.max_notice (3 s
        here) is the most any job gets; the --signal lead still counts before a time limit."""
        self.write(os.path.join(self.bin, "deaf"),
                   "#!/bin/sh\ntrap '' TERM\nwhile :; do sleep 0.1; done\n", 0o755)
        alice = [self.submit_as(ALICE, *EXCLUSIVE, "--requeue", "--signal", "TERM@65535", "--",
                                "deaf") for _ in range(2)]
        for job in alice:
            self.wait_as(ALICE, job, "running")
        self.assertIn("Signal=SIGTERM@65535", self.as_(ALICE, "show", alice[0]).stdout)
        bob = self.submit_as(BOB, *EXCLUSIVE, "--", "true")
        self.wait_as(BOB, bob, "succeeded", deadline=30)
        (victim,) = [j for j in alice if self.events(ALICE, j, "preempted")]
        (preempting,) = self.events(ALICE, victim, "preempting")
        self.assertIn("SIGKILL in 3 s", preempting["detail"])
        first = self.show_as(ALICE, victim)["attempt_list"][0]
        self.assertEqual((first["exit_kind"], first.get("exit_signal")), ("preempted", 9), first)
        self.assertLess(first["ended"] - first["started"], 60, first)
        for job in alice:
            self.as_(ALICE, "cancel", job)


class BadSignals(PreemptionTest):
    def test_bad_signal_options_are_refused(self):
        """--signal names one of the signals colo sends, and a lead of 0..65535 s."""
        for value, expected in [("KILL", "is not one colo sends"),
                                ("SEGV", "is not one colo sends"), ("USR1@x", "not a number"),
                                ("NOPE@10", "is not a signal"), ("TERM@70000", "0..65535")]:
            r = self.as_(ALICE, "submit", "--requeue", "--signal", value, "--", "true")
            self.assertEqual(r.returncode, 2, (value, r.stdout, r.stderr))
            self.assertIn(expected, r.stderr, value)


class KillNineDuringPreemptions(PreemptionTest):
    config = {"limits": {"max_clients_per_user": 8, "idle_timeout": "60s"},
              "fairness": {"preempt_after": "1s"}}
    ROUNDS = 20

    def test_kill_9_loop_while_preempting(self):
        """Alice keeps both GPUs busy with --requeue training jobs; Bob submits a short job
        after each restart, which preempts one of hers; colod is killed with SIGKILL at a random
        moment, 20 times. Then everything finishes: every job succeeded once, none was lost,
        no two attempts of one job ran at once, and every training job reached its last step."""
        seed = int(os.environ.get("COLO_E2E_SEED", time.time_ns() % 100000))
        print(f"kill -9 during preemptions, seed {seed} (COLO_E2E_SEED to repeat)")
        rng = random.Random(seed)
        log = {u.name: os.path.join(self.work[u.name], "attempts.log") for u in (ALICE, BOB)}
        alice = [self.submit_as(ALICE, *EXCLUSIVE, "--requeue", "--signal", "USR1@5", "--",
                                "logged", log[ALICE.name], "train.py", "--steps", "250",
                                "--step-seconds", "0.2", "--checkpoint", f"ckpt-{i}.json")
                 for i in range(4)]
        bob = []
        for _ in range(self.ROUNDS):
            bob.append(self.submit_as(BOB, *EXCLUSIVE, "--", "logged", log[BOB.name], "sleep",
                                      "0.5"))
            time.sleep(rng.uniform(0.5, 3.0))  # the random moment of the kill
            self.d.kill9()
            self.d.start()
        jobs = {ALICE.name: alice, BOB.name: bob}
        ended = {}
        for user in (ALICE, BOB):
            for job in jobs[user.name]:
                ended[job] = self.wait_as(user, job, TERMINAL, deadline=240)
        not_ok = {j: e["state"] for j, e in ended.items() if e["state"] != "succeeded"}
        self.assertEqual(not_ok, {}, "jobs that did not succeed")

        preemptions = sum(1 for j in alice
                          for a in ended[j]["attempt_list"] if a["exit_kind"] == "preempted")
        print(f"{preemptions} preemptions of {len(alice)} jobs over {self.ROUNDS} kill -9")
        self.assertGreaterEqual(preemptions, 3, "preemptions were under way")
        for user in (ALICE, BOB):
            runs = {}
            with open(log[user.name]) as f:
                for line in f:
                    what, job, attempt, restarts, when = line.split()
                    runs.setdefault((int(job), int(attempt)), {})[what] = float(when)
                    if what == "start":
                        runs[(int(job), int(attempt))]["restarts"] = int(restarts)
            for job in jobs[user.name]:
                attempts = sorted(a for j, a in runs if j == job)
                stored = [a["number"] for a in ended[job]["attempt_list"]]
                # Every stored attempt ran once (an attempt that never started is not stored).
                self.assertEqual(attempts, stored, f"job {job}: attempts run vs stored")
                spans = [(runs[(job, a)]["start"], runs[(job, a)].get("end", float("inf")))
                         for a in attempts]
                for (_, end), (start, _) in zip(spans, spans[1:]):
                    self.assertLessEqual(end, start, f"job {job}: two attempts ran at once")
                last = runs[(job, attempts[-1])]
                self.assertEqual(last["restarts"], len(attempts) - 1, f"job {job}")
        for i in range(len(alice)):
            with open(os.path.join(self.work[ALICE.name], f"ckpt-{i}.json")) as f:
                self.assertEqual(json.load(f)["step"], 250)


if __name__ == "__main__":
    harness.main()
