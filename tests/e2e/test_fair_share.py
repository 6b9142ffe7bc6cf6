#!/usr/bin/env python3
"""Fair share among users of one system colod (run as root), through the real programs: a light
user's job goes before a heavy user's backlog, per-user limits hold a user's jobs with the reason,
backfill keeps the head's reservation, `colo share` and `colo explain` say where everyone stands,
and usage survives a restart (README, "Sharing a server"; docs/admin.md, "Shares and limits").

Needs root and the users colo-alice and colo-bob (CI makes them; .ci/run). Skipped (77) without.
"""

import os
import sqlite3

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
        backlog = self.submit_as(ALICE, *EXCLUSIVE, "--array", "1-1000", "--", "true")
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
        for path in (short_release, release_a):
            self.release(path)
        self.wait_as(BOB, head, "succeeded")
        self.wait_as(ALICE, long_job, "succeeded")


if __name__ == "__main__":
    harness.main()
