#!/usr/bin/env python3
"""Fair share among users of one system colod (run as root), through the real programs: a light
user's job goes before a heavy user's backlog, per-user limits hold a user's jobs with the reason,
backfill keeps the head's reservation, `colo share` and `colo explain` say where everyone stands,
and usage survives a restart (README, "Sharing a server"; docs/admin.md, "Shares and limits").

Needs root and the users colo-alice and colo-bob (CI makes them; .ci/run). Skipped (77) without.
"""

import json
import os
import sqlite3
import time

import harness
from test_multi_user import ALICE, BOB, MultiUserTest

EXCLUSIVE = ("--share", "exclusive")


class FairShareTest(MultiUserTest):
    config = {"limits": {"max_clients_per_user": 8}}

    def explain(self, user, job):
        return self.json_as(user, "explain", job)

    def queued_of(self, user):
        return [j for j in self.json_as(user, "queue", "--user", user.name)["jobs"]
                if j["state"] == "queued"]


class LightUserBeforeHeavyBacklog(FairShareTest):
    def test_bobs_job_starts_when_the_first_gpu_frees(self):
        """Alice holds both GPUs and has 1,000 more jobs queued; Bob's one job, submitted last,
        is first in the queue and starts as soon as one of Alice's jobs ends."""
        a1, release_a1 = self.running_job(ALICE, *EXCLUSIVE)
        a2, release_a2 = self.running_job(ALICE, *EXCLUSIVE)
        # Tasks that run until cancelled: once Bob's job has ended, the GPU it freed takes one of
        # them and keeps it, so how many still wait says how many went before Bob's.
        backlog = self.submit_as(ALICE, *EXCLUSIVE, "--array", "1-1000", "--", "sleep", "600")
        bob = self.submit_as(BOB, *EXCLUSIVE, "--", "true")

        mine = self.explain(BOB, bob)
        self.assertEqual((mine["position"], mine["waiting"]), (1, 1001), mine)
        self.assertIn(f"{BOB.name} has had 0% of this server", mine["standing"])
        theirs = self.explain(ALICE, f"{backlog}_1")
        self.assertEqual(theirs["position"], 2, theirs)
        self.assertIn(f"2nd of 1001 in the queue: {ALICE.name} has had 100% of this server",
                      theirs["summary"])
        text = self.as_(ALICE, "explain", f"{backlog}_1").stdout
        self.assertIn("position 2 of 1001 in the main queue", text)
        self.assertIn("fair share: ", text)

        self.release(release_a1)
        self.wait_as(BOB, bob, "succeeded")
        self.assertGreaterEqual(len(self.queued_of(ALICE)), 990,
                                "Bob's job waited for Alice's backlog")
        started = self.show_as(BOB, bob)["started"]
        first_task = self.show_as(ALICE, f"{backlog}_1")
        self.assertTrue(first_task["started"] == 0 or first_task["started"] >= started,
                        "an earlier task of Alice's started before Bob's job")
        self.release(release_a2)
        self.as_(ALICE, "cancel", str(backlog))
        for job in (a1, a2):
            self.wait_as(ALICE, job, "succeeded")

    def test_share_lists_users_usage_and_factors(self):
        """`colo share` (like sshare): Alice, who has run, has usage and a lower factor than Bob,
        who waits; JSON has the same."""
        a, release_a = self.running_job(ALICE, *EXCLUSIVE)
        b, release_b = self.running_job(BOB, *EXCLUSIVE)
        self.release(release_b)
        self.wait_as(BOB, b, "succeeded")
        waiting = self.submit_as(BOB, *EXCLUSIVE, "-G", "2", "--", "true")
        share = self.json_as(BOB, "share")
        self.assertEqual(share["order"], "fair-share")
        self.assertEqual(share["half_life_s"], 7 * 86400)
        users = {u["user"]: u for u in share["users"]}
        self.assertEqual(set(users), {ALICE.name, BOB.name})
        alice, bob = users[ALICE.name], users[BOB.name]
        self.assertEqual((alice["running"], alice["gpus"]), (1, 1))
        self.assertEqual((bob["running"], bob["waiting"]), (0, 1))
        self.assertGreater(alice["usage_gpu_hours"], 0)
        self.assertAlmostEqual(alice["share_fraction"], 0.5)
        self.assertGreater(alice["usage_fraction"], bob["usage_fraction"])
        self.assertLess(alice["factor"], bob["factor"])
        self.assertEqual(share["users"][0]["user"], BOB.name, "the highest factor first")
        text = self.as_(ALICE, "share").stdout
        self.assertIn("USER", text)
        self.assertIn("FACTOR", text)
        self.assertRegex(text, rf"{ALICE.name}\s+1\s+50%")
        self.release(release_a)
        self.wait_as(BOB, waiting, "succeeded")
        self.wait_as(ALICE, a, "succeeded")

    def test_usage_is_kept_across_a_restart(self):
        """colod stores every user's usage at a stop; the next colod reads it back."""
        a, release_a = self.running_job(ALICE, *EXCLUSIVE)
        self.release(release_a)
        self.wait_as(ALICE, a, "succeeded")
        self.assertEqual(self.d.stop(), 0)
        with sqlite3.connect(f"file:{self.d.state_dir}/colo.db?mode=ro", uri=True) as db:
            stored = db.execute("SELECT value FROM meta WHERE key = 'usage'").fetchone()[0]
        self.assertIn(f" {ALICE.name}\n", stored)
        self.d.start()
        users = {u["user"]: u for u in self.json_as(BOB, "share")["users"]}
        self.assertIn(ALICE.name, users)
        self.assertGreater(users[ALICE.name]["usage_gpu_hours"], 0)


class PerUserLimits(FairShareTest):
    config = {"limits": {"max_clients_per_user": 8},
              "fairness": {"limits": {"gpus": 1}, "users": {BOB.name: {"share": 2}}}}

    def test_alice_holds_no_more_than_her_limit(self):
        """With one GPU per user, Alice's second and third jobs wait with the limit named while
        the other GPU runs Bob's job; when hers ends, the next one starts."""
        first, release_first = self.running_job(ALICE, *EXCLUSIVE)
        releases = [os.path.join(self.tmp, f"release-alice-{i}") for i in range(2)]
        held = [self.submit_as(ALICE, *EXCLUSIVE, "--", "wait-for", r) for r in releases]
        b, release_b = self.running_job(BOB, *EXCLUSIVE)
        for job in held:
            why = self.explain(ALICE, job)
            self.assertEqual(why["state"], "queued")
            self.assertIn(f"{ALICE.name} holds 1 of the 1 GPUs one user may hold", why["limit"])
            self.assertTrue(why["summary"].startswith("held by its owner's limits"), why)
        text = self.as_(ALICE, "explain", held[0]).stdout
        self.assertIn("limit: ", text)
        share = {u["user"]: u for u in self.json_as(ALICE, "share")["users"]}
        self.assertEqual(share[ALICE.name]["limits"], "gpus 1")
        self.assertEqual((share[ALICE.name]["running"], share[ALICE.name]["waiting"]), (1, 2))
        self.assertEqual(share[BOB.name]["share"], 2)
        self.assertAlmostEqual(share[BOB.name]["share_fraction"], 2 / 3)

        self.release(release_first)
        self.wait_as(ALICE, held[0], "running")
        self.assertEqual(self.show_as(ALICE, held[1])["state"], "queued")
        for path in releases + [release_b]:
            self.release(path)
        for job in held:
            self.wait_as(ALICE, job, "succeeded")
        self.wait_as(BOB, b, "succeeded")

    def test_a_job_beyond_the_limit_is_refused(self):
        """A job asking for more GPUs than its owner may ever hold is refused at submission."""
        r = self.as_(ALICE, "submit", "-G", "2", "--", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("within its owner's limits", r.stderr)


class Backfill(FairShareTest):
    def test_head_reservation_and_a_short_job_before_it(self):
        """Alice runs a 10-minute job on one GPU; Bob's 2-GPU job is the head and gets a
        reservation from Alice's --time; Alice's 1-minute job starts on the free GPU (it ends
        before the head's time), her 1-hour job does not."""
        a, release_a = self.running_job(ALICE, *EXCLUSIVE, "--time", "10")
        head = self.submit_as(BOB, *EXCLUSIVE, "-G", "2", "--", "true")
        short_release = os.path.join(self.tmp, "release-short")
        long_job = self.submit_as(ALICE, *EXCLUSIVE, "--time", "60", "--", "true")
        short = self.submit_as(ALICE, *EXCLUSIVE, "--time", "1", "--", "wait-for", short_release)
        self.wait_as(ALICE, short, "running")
        why = self.explain(BOB, head)
        self.assertEqual(why["position"], 1, why)
        # Both GPUs, once Alice's 10-minute job (and her short one, once the pass that started it
        # has been followed by another) have ended.
        self.assertRegex(why["reservation"], rf"GPUs 0, 1 kept for it from about \d+ min from "
                                             rf"now, when (job {a} ends|jobs {short}, {a} end)")
        self.assertIn("reservation: ", self.as_(BOB, "explain", head).stdout)
        self.assertEqual(self.show_as(ALICE, long_job)["state"], "queued")
        # colo explain says what the pass decides for a job behind the head that does not end
        # before the head's time: both GPUs are kept for the head.
        kept = self.explain(ALICE, long_job)
        self.assertEqual([g["gate"] for g in kept["gpus"]], ["earmarked", "earmarked"], kept)
        for path in (short_release, release_a):
            self.release(path)
        self.wait_as(BOB, head, "succeeded")
        self.wait_as(ALICE, long_job, "succeeded")


class ManyJobsDropped(FairShareTest):
    """Holds, releases and cancels of many waiting jobs at once leave the scheduler's queues and
    every user's count of waiting jobs as colo queue shows them, keep the order between users,
    and hold across a kill -9 in the middle of a batch."""

    def control(self, user, action, ids, reply=True):
        """One control request for all of `ids`; its results, or None without waiting for them."""
        [s] = harness.connect_as(self.d.socket, user)
        with s:
            request = {"api": 1, "op": "control", "action": action, "jobs": ids}
            if not reply:
                s.sendall(json.dumps(request).encode() + b"\n")
                return None
            answer = harness.request(s, request, deadline=60)
            self.assertTrue(answer["ok"], answer)
            return answer["results"]

    def assert_counts_agree(self, expected):
        """colo share's waiting jobs per user (the scheduler's owner index) are the jobs colo
        queue shows waiting in the scheduler's queue (neither held nor capped), as expected."""
        queue = self.json_as(ALICE, "queue")["jobs"]
        in_queue = {}
        for job in queue:
            if job["state"] == "queued" and not job["reason"].startswith("held"):
                in_queue[job["user"]] = in_queue.get(job["user"], 0) + 1
        share = {u["user"]: u["waiting"] for u in self.json_as(BOB, "share")["users"]}
        shown = {user: share.get(user, 0) for user in expected}
        self.assertEqual({user: in_queue.get(user, 0) for user in expected}, expected)
        self.assertEqual(shown, expected, "colo share counts jobs that left the queue")
        return queue

    def test_holds_releases_and_cancels_of_an_array(self):
        a1, release_a1 = self.running_job(ALICE, *EXCLUSIVE)
        a2, release_a2 = self.running_job(ALICE, *EXCLUSIVE)
        first = self.submit_as(ALICE, *EXCLUSIVE, "--array", "0-999", "--", "true")
        tasks = list(range(first, first + 1000))
        bobs = [self.submit_as(BOB, *EXCLUSIVE, "--", "true") for _ in range(2)]

        self.assertEqual({r["state"] for r in self.control(ALICE, "hold", tasks[:600])}, {"held"})
        self.assertEqual({r["state"] for r in self.control(ALICE, "release", tasks[:300])},
                         {"queued"})
        # Held ones and queued ones cancelled in one request each.
        for part in (tasks[300:400], tasks[600:700]):
            self.assertEqual({r["state"] for r in self.control(ALICE, "cancel", part)},
                             {"cancelled"})
        self.assert_counts_agree({ALICE.name: 600, BOB.name: 2})
        mine = self.explain(BOB, bobs[0])
        self.assertEqual((mine["position"], mine["waiting"]), (1, 602), mine)

        # kill -9 while colod holds every live task in one write: all of them or none are held
        # after the restart, and the queues agree with what was stored.
        live = tasks[:300] + tasks[400:600] + tasks[700:]
        self.control(ALICE, "hold", live, reply=False)
        time.sleep(0.05)
        self.d.kill9()
        self.d.start()
        alive = [j for j in self.json_as(ALICE, "queue")["jobs"] if j["id"] in set(tasks)]
        self.assertEqual(len(alive), 800)
        held = sum(1 for j in alive if j["reason"].startswith("held"))
        self.assertIn(held, (200, 800), "a batch of holds was stored in part")
        self.assert_counts_agree({ALICE.name: 800 - held, BOB.name: 2})

        self.control(ALICE, "release", live)
        self.assert_counts_agree({ALICE.name: 800, BOB.name: 2})

        # kill -9 while colod cancels a second array's 200 waiting tasks in one write: all of
        # them or none are cancelled after the restart.
        second = self.submit_as(ALICE, *EXCLUSIVE, "--array", "0-199", "--", "true")
        self.control(ALICE, "cancel", [second], reply=False)
        time.sleep(0.05)
        self.d.kill9()
        self.d.start()
        left = sum(1 for j in self.json_as(ALICE, "queue")["jobs"]
                   if second <= j["id"] < second + 200)
        self.assertIn(left, (0, 200), "a batch of cancels was stored in part")
        self.assert_counts_agree({ALICE.name: 800 + left, BOB.name: 2})
        self.assertEqual(self.as_(ALICE, "cancel", str(second)).returncode, 0 if left else 1)
        self.assert_counts_agree({ALICE.name: 800, BOB.name: 2})
        # Bob has had nothing of this server: his jobs go before Alice's 800 when her GPUs free.
        self.release(release_a1)
        self.wait_as(BOB, bobs[0], "succeeded")
        self.release(release_a2)
        self.wait_as(BOB, bobs[1], "succeeded")
        started = {self.show_as(BOB, b)["started"] for b in bobs}
        self.assertEqual(self.as_(ALICE, "cancel", str(first)).returncode, 0)
        for task in tasks[:5]:
            detail = self.show_as(ALICE, task)
            self.assertTrue(detail["started"] == 0 or detail["started"] >= min(started),
                            f"task {task} of Alice's started before Bob's first job")
            self.assertLessEqual(len(detail["attempt_list"]), 1)
        self.assert_counts_agree({ALICE.name: 0, BOB.name: 0})
        for job in (a1, a2):
            self.wait_as(ALICE, job, "succeeded")

    def test_hold_release_cancel_requeue_of_one_job(self):
        """One waiting job through hold, release, hold, cancel, requeue and a restart: each step
        answers what the job is, the counts follow, and it runs once when its turn comes."""
        a1, release_a1 = self.running_job(ALICE, *EXCLUSIVE)
        a2, release_a2 = self.running_job(ALICE, *EXCLUSIVE)
        job = self.submit_as(BOB, *EXCLUSIVE, "--", "true")
        steps = [("hold", "held", 0), ("release", "queued", 1), ("hold", "held", 0),
                 ("release", "queued", 1), ("cancel", "cancelled", 0)]
        for action, state, waiting in steps:
            [result] = self.control(BOB, action, [job])
            self.assertEqual(result.get("state"), state, (action, result))
            self.assert_counts_agree({BOB.name: waiting})
        [result] = self.control(BOB, "release", [job])
        self.assertIn("already ended", result["error"])
        self.assertEqual(self.as_(BOB, "requeue", str(job)).returncode, 0)
        self.assert_counts_agree({BOB.name: 1})
        self.control(BOB, "hold", [job])
        self.d.kill9()
        self.d.start()
        self.assert_counts_agree({BOB.name: 0})
        self.control(BOB, "release", [job])
        self.assert_counts_agree({BOB.name: 1})
        self.release(release_a1)
        detail = self.wait_as(BOB, job, "succeeded")
        self.assertEqual(len(detail["attempt_list"]), 1, detail)
        self.release(release_a2)
        for j in (a1, a2):
            self.wait_as(ALICE, j, "succeeded")


if __name__ == "__main__":
    harness.main()
