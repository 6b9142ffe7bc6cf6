#!/usr/bin/env python3
"""Two ordinary users on one system colod (run as root), and personal colods: who runs what, who
sees what, and what a hostile job or client cannot do (README, "Security model").

Needs root and the users colo-alice and colo-bob (CI makes them; .ci/run). Skipped (77) without.
"""

import errno
import json
import os
import shutil
import signal
import sqlite3
import stat
import socket
import subprocess
import threading
import time
import uuid

import harness
import lifecycle
import ptrace_stop
from harness import wait_until

WAIT_SCRIPT = """#!/bin/sh
echo "started $COLO_JOB_ID"
i=0
while [ ! -e "$1" ]; do
  i=$((i + 1))
  if [ $i -gt 1200 ]; then echo "gave up" >&2; exit 3; fi
  sleep 0.05
done
echo "finished $COLO_JOB_ID"
"""

# The job replaces its own output files by something hostile while it runs, then fails with an
# error colod must classify from those files' tails.
REPLACE_SCRIPT = """#!/bin/sh
dir="$1/$COLO_JOB_ID"
kind="$2"
n=$COLO_ATTEMPT
echo "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2
for f in err out; do
  rm -f "$dir/attempt-$n.$f"
  case "$kind" in
    link) ln -s /etc/shadow "$dir/attempt-$n.$f" ;;
    fifo) mkfifo "$dir/attempt-$n.$f" ;;
    dirlink) ln -s /etc "$dir/attempt-$n.$f" ;;
  esac
done
echo "replaced" > "$3"
exit 1
"""

TERMINAL = {"succeeded", "failed", "cancelled", "lost"}

if not harness.is_root():
    harness.skip_file("multi-user tests need root (a system colod serving two users)")
ALICE = harness.user_or_none("colo-alice")
BOB = harness.user_or_none("colo-bob")
if ALICE is None or BOB is None:
    harness.skip_file("users colo-alice and colo-bob are missing (CI creates them: .ci/run)")


class MultiUserTest(harness.E2ETest):
    """A system colod (root) with a low per-user connection limit, and a workdir per user."""

    config = {"limits": {"max_clients_per_user": 4, "idle_timeout": "3s"}}

    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.write(os.path.join(self.bin, "wait-for"), WAIT_SCRIPT, 0o755)
        self.write(os.path.join(self.bin, "replace-logs"), REPLACE_SCRIPT, 0o755)
        self.work = {u.name: self.mkdir(u.name, user=u, mode=0o700) for u in (ALICE, BOB)}
        options = self.daemon_options()  # may set self.config
        self.d = self.colod(config=self.config, **options)
        self.jobs_dir = self.config.get("paths", {}).get("jobs_dir") or os.path.join(
            self.d.state_dir, "jobs")

    def daemon_options(self):
        """Subclasses: more of Colod's options (a state directory elsewhere)."""
        return {}

    def colo(self, *args, **kwargs):
        """colo ARGS against the system colod, as `user` (default: client_user; None: root),
        from that user's workdir."""
        user = kwargs.get("user") or self.client_user
        if kwargs.get("cwd") is None:
            kwargs["cwd"] = self.work[user.name] if user else self.tmp
        kwargs.setdefault("path_prefix", self.bin)
        kwargs.setdefault("daemon", self.d)
        return super().colo(*args, **kwargs)

    def as_(self, user, *args, **kwargs):
        """colo ARGS as `user` (None: root, in classes whose client_user is None)."""
        return self.colo(*args, user=user, **kwargs)

    def json_as(self, user, command, *args, **kwargs):
        r = self.as_(user, command, "--json", *args, **kwargs)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def submit_as(self, user, *args, **kwargs):
        return int(self.json_as(user, "submit", *args, **kwargs)["job"])

    def show_as(self, user, job):
        return self.json_as(user, "show", job)["job"]

    def wait_as(self, user, job, states, deadline=harness.JOB_DEADLINE):
        states = {states} if isinstance(states, str) else set(states)
        return wait_until(lambda: (lambda j: j if j["state"] in states else None)(
            self.show_as(user, job)), deadline, f"job {job} to be one of {sorted(states)}", 0.1)

    def running_job(self, user, *args, extra_env=None):
        """A job of `user` that runs until released: (job, release path)."""
        release = os.path.join(self.tmp, f"release-{uuid.uuid4().hex[:8]}")
        job = self.submit_as(user, *args, "--", "wait-for", release, extra_env=extra_env)
        self.wait_as(user, job, "running")
        return job, release

    def release(self, path):
        self.write(path, "")

    def run_as(self, user, *argv):
        """A plain program as `user`; (exit code, stdout+stderr)."""
        r = subprocess.run(harness.as_user(user, list(argv)), capture_output=True, timeout=30,
                           env={"PATH": harness.SYSTEM_PATH, "HOME": user.home}, cwd="/")
        return r.returncode, (r.stdout + r.stderr).decode(errors="replace")

    def db_bytes(self):
        """colo.db and its WAL as root reads them."""
        data = b""
        for suffix in ("", "-wal"):
            try:
                with open(os.path.join(self.d.state_dir, "colo.db" + suffix), "rb") as f:
                    data += f.read()
            except FileNotFoundError:
                pass
        return data

    def record_of(self, job):
        with sqlite3.connect(f"file:{self.d.state_dir}/colo.db?mode=ro", uri=True,
                             timeout=10) as db:
            return db.execute("SELECT record FROM jobs WHERE id = ?", (job,)).fetchone()[0]


class WhoRunsWhat(MultiUserTest):
    def test_job_runs_as_alice_with_her_groups(self):
        """Alice's job runs as alice with exactly her groups from the group database (`id -G
        colo-alice`), her primary group as its gid, and a job directory she alone owns."""
        expected_groups = subprocess.run(["id", "-G", ALICE.name], capture_output=True,
                                         text=True, check=True).stdout.split()
        job = self.submit_as(ALICE, "--", "sh", "-c", 'echo "$(id -u) $(id -g) $(id -G)"')
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "succeeded")
        out = self.as_(ALICE, "logs", job).stdout.split()
        self.assertEqual(out[:2], [str(ALICE.uid), str(ALICE.gid)])
        self.assertEqual(sorted(out[2:]), sorted(expected_groups))
        st = os.stat(os.path.join(self.jobs_dir, str(job)))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (ALICE.uid, 0o700))

    def test_a_gid_alice_is_not_in_does_not_count(self):
        """Alice connecting with root's gid and no groups (a set-gid program, say) still gets a
        job with her own gid and groups: the connection's gid counts only if the database puts
        her in that group."""
        expected_groups = sorted(str(g) for g in ALICE.groups)
        job = self.submit_as(ALICE, "--", "sh", "-c", 'echo "$(id -g) $(id -G)"', gid=0,
                             clear_groups=True)
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "succeeded")
        out = self.as_(ALICE, "logs", job).stdout.split()
        self.assertEqual(out[0], str(ALICE.gid))
        self.assertNotIn("0", out[1:])
        self.assertEqual(sorted(out[1:]), expected_groups)

    def test_root_jobs_run_as_root_and_others_never_do(self):
        """Root's own job runs as root; bob's never does."""
        root_job = self.submit_as(None, "--", "id", "-u")
        bob_job = self.submit_as(BOB, "--", "id", "-u")
        for user, job, uid in [(None, root_job, 0), (BOB, bob_job, BOB.uid)]:
            self.assertEqual(self.wait_as(user, job, TERMINAL)["state"], "succeeded")
            self.assertEqual(self.as_(user, "logs", job).stdout.strip(), str(uid))

    def test_uid_without_passwd_entry_may_look_but_not_submit(self):
        """A uid the passwd database does not name may list the queue but not submit."""
        ghost = harness.User.__new__(harness.User)
        ghost.name, ghost.uid, ghost.gid, ghost.home, ghost.groups = "ghost", 54321, 54321, "/", []
        env = {"PATH": harness.SYSTEM_PATH, "HOME": "/", "COLO_SOCKET": self.d.socket,
               self.token.split("=")[0]: self.token.split("=")[1]}
        r = self.colo("queue", user=ghost, env=env, cwd="/", clear_groups=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.colo("submit", "--", "true", user=ghost, env=env, cwd="/", clear_groups=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no entry in the passwd database", r.stderr)

    def test_workdir_checked_as_the_user(self):
        """Bob cannot submit a job into alice's private workdir: colod checks it as bob."""
        r = self.as_(BOB, "submit", "--workdir", self.work[ALICE.name], "--", "true",
                     cwd=self.work[BOB.name])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(self.work[ALICE.name], r.stderr)
        self.assertEqual(self.json_as(BOB, "queue")["jobs"], [])


class WhoSeesWhat(MultiUserTest):
    def test_bob_cannot_read_alices_secrets(self):
        """A secret in alice's environment at submit is stored, but bob can read neither the
        database, its WAL, nor the state directory's listing; `colo show`, `logs` and `cancel`
        of her job are refused to him; the queue shows it; `colo history --all` shows it
        without its reason; once it ends its environment leaves the record."""
        secret = "s3cr3t-" + uuid.uuid4().hex
        job, release = self.running_job(ALICE, "--name", "alices", extra_env={"SECRET": secret})
        self.assertIn(secret.encode(), self.db_bytes(), "the secret is not in the database")
        state = self.d.state_dir
        for path in (state, self.jobs_dir):
            st = os.stat(path)
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o711), path)
        for name in ("colo.db", "colo.db-wal"):
            path = os.path.join(state, name)
            st = os.stat(path)
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o600), path)
            code, out = self.run_as(BOB, "cat", path)
            self.assertNotEqual(code, 0, f"bob read {path}")
            self.assertNotIn(secret, out)
        for path in (state, self.jobs_dir, os.path.join(self.jobs_dir, str(job))):
            code, out = self.run_as(BOB, "ls", path)
            self.assertNotEqual(code, 0, f"bob listed {path}: {out}")
        code, out = self.run_as(BOB, "cat", os.path.join(self.jobs_dir, str(job), "attempt-1.out"))
        self.assertNotEqual(code, 0)
        code, out = self.run_as(ALICE, "ls", os.path.join(self.jobs_dir, str(job)))
        self.assertEqual(code, 0, out)

        for args, verb in [(("show", job), "see its details"), (("logs", job), "read its output"),
                           (("cancel", job), "cancel it"), (("show", "--json", job), "see")]:
            r = self.as_(BOB, *args)
            self.assertEqual(r.returncode, 1, args)
            self.assertIn("belongs to colo-alice", harness.error_message(r))
            self.assertIn(verb, harness.error_message(r))
            self.assertNotIn(secret, r.stdout + r.stderr)
        self.assertEqual(self.show_as(ALICE, job)["state"], "running")
        queue = self.json_as(BOB, "queue")["jobs"]
        self.assertEqual([(j["id"], j["name"], j["user"], j["state"]) for j in queue],
                         [(job, "alices", ALICE.name, "running")])
        self.assertNotIn(secret, self.as_(BOB, "queue", "--json").stdout)

        self.release(release)
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "succeeded")
        self.assertNotIn(secret, self.record_of(job), "an ended job kept its environment")

    def test_history_all_hides_reasons(self):
        """Bob's `colo history --all` lists alice's failed job (id, name, user, state) without
        its reason, which may quote her output; alice and root see the reason."""
        marker = "private-" + uuid.uuid4().hex
        job = self.submit_as(ALICE, "--", "sh", "-c", f"echo {marker} >&2; exit 7")
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "failed")
        self.assertIn(marker, self.show_as(ALICE, job)["reason"])
        bobs = self.json_as(BOB, "history", "--all")["jobs"]
        [seen] = [j for j in bobs if j["id"] == job]
        self.assertEqual((seen["user"], seen["state"], seen["reason"], seen.get("redacted")),
                         (ALICE.name, "failed", "", True))
        for text in (self.as_(BOB, "history", "--all").stdout,
                     self.as_(BOB, "history", "--all", "--json").stdout):
            self.assertNotIn(marker, text)
        self.assertEqual(self.json_as(BOB, "history")["jobs"], [])
        root_view = [j for j in self.json_as(None, "history", "--all")["jobs"] if j["id"] == job]
        self.assertIn(marker, root_view[0]["reason"])

    def test_report_redacts_other_users_jobs(self):
        """`colo report` shows bob every GPU's series and alice's job with its GPUs and times,
        but not what ended it (her output); alice and root see it."""
        marker = "private-" + uuid.uuid4().hex
        job = self.submit_as(ALICE, "--", "sh", "-c", f"echo {marker} >&2; sleep 0.5; exit 7")
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "failed")
        time.sleep(0.5)

        def jobs_of(report):
            return {j["id"]: j for j in report["runs"][0]["job_results"]}

        bobs = self.as_(BOB, "report", "--json")
        self.assertEqual(bobs.returncode, 0, bobs.stderr)
        self.assertNotIn(marker, bobs.stdout)
        seen = jobs_of(json.loads(bobs.stdout))[job]
        self.assertEqual(seen["state"], "failed")
        self.assertEqual(seen["reason"], "(another user's)")
        self.assertNotIn("exit_code", json.dumps(seen), "her exit code is hers")
        csv_dir = os.path.join(self.tmp, "bob-csv")
        os.makedirs(csv_dir, mode=0o777)
        os.chmod(csv_dir, 0o777)

        def gpus_in_csv():
            # colod writes its history every 10 s (history.flush_interval); a user may ask for
            # 5 reports in 10 s.
            r = self.as_(BOB, "report", "--csv", csv_dir)
            if r.returncode != 0 and "reports in 10 s per user" in r.stderr:
                return False
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(csv_dir, "gpus.csv")) as f:
                return len({line.split(",")[1] for line in f.readlines()[1:]}) == 2
        wait_until(gpus_in_csv, 30, "every GPU's series in bob's report", 1)
        with open(os.path.join(csv_dir, "jobs.csv")) as f:
            rows = f.read()
        self.assertIn(f"\n{job},", rows)
        self.assertNotIn(marker, rows)
        for user in (ALICE, None):
            self.assertIn(marker, jobs_of(self.json_as(user, "report"))[job]["reason"])

    def test_reports_are_rationed_per_user(self):
        """A report is read on colod's event loop: one user gets at most 5 in 10 s, the next is
        refused as busy with when to ask again; another user and root are not held up."""
        codes = [self.as_(BOB, "report", "--json").returncode for _ in range(6)]
        self.assertEqual(codes[:5], [0] * 5)
        refused = self.as_(BOB, "report", "--json")
        self.assertEqual(refused.returncode, 1)
        self.assertIn('"code":"busy"', refused.stdout.replace(" ", ""))
        self.assertIn("at most 5 reports in 10 s per user", refused.stdout)
        self.assertEqual(self.as_(ALICE, "report", "--json").returncode, 0)
        self.json_as(None, "report")

    def test_queue_of_one_user(self):
        """`colo queue --user NAME` lists that user's jobs only, to anyone."""
        a, release_a = self.running_job(ALICE, "--name", "of-alice")
        b, release_b = self.running_job(BOB, "--name", "of-bob")
        for viewer in (ALICE, BOB, None):
            jobs = self.json_as(viewer, "queue", "--user", BOB.name)["jobs"]
            self.assertEqual([(j["id"], j["user"]) for j in jobs], [(b, BOB.name)])
        self.assertEqual(sorted(j["id"] for j in self.json_as(BOB, "queue")["jobs"]), [a, b])
        text = self.as_(BOB, "queue", "--user", ALICE.name).stdout
        self.assertIn("of-alice", text)
        self.assertNotIn("of-bob", text)
        for release in (release_a, release_b):
            self.release(release)

    def test_only_owner_or_root_cancels(self):
        """Bob's cancel of alice's job is refused and changes nothing; root's cancel works."""
        job, _ = self.running_job(ALICE)
        r = self.as_(BOB, "cancel", job)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.show_as(ALICE, job)["state"], "running")
        self.assertEqual(self.json_as(None, "cancel", job)["state"], "cancelling")
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "cancelled")


class HostileJobs(MultiUserTest):
    def shadow_lines(self):
        with open("/etc/shadow") as f:
            return [line.strip() for line in f if len(line.strip()) > 8]

    def hostile_job(self, kind):
        done = os.path.join(self.work[ALICE.name], f"done-{kind}")
        job = self.submit_as(ALICE, "--", "replace-logs", self.jobs_dir, kind, done)
        detail = self.wait_as(ALICE, job, TERMINAL)
        self.assertTrue(os.path.exists(done), f"the job did not replace its logs: {detail}")
        return job, detail

    def test_logs_replaced_by_a_link_to_shadow(self):
        """Alice's job replaces its attempt-1.err and .out with links to /etc/shadow while it
        runs: colod classifies its end without following them (a plain failure, not the OOM the
        old file said), and nothing of shadow reaches `colo show`, its JSON or `colo logs`."""
        job, detail = self.hostile_job("link")
        self.assertEqual(detail["state"], "failed")
        self.assertEqual([a["exit_kind"] for a in detail["attempt_list"]], ["failure"])
        texts = [self.as_(ALICE, "show", job).stdout, self.as_(ALICE, "show", "--json", job).stdout,
                 self.as_(None, "show", job).stdout]
        r = self.as_(ALICE, "logs", job)
        self.assertEqual(r.returncode, 1)
        texts.append(r.stdout + r.stderr)
        for user in (ALICE, None):
            r = self.as_(user, "logs", "--stderr", job)
            texts.append(r.stdout + r.stderr)
        for text in texts:
            for line in self.shadow_lines():
                self.assertNotIn(line, text)
        self.assertTrue(self.d.alive())

    def test_logs_replaced_by_a_fifo(self):
        """A FIFO in place of the job's logs hangs neither colod (it keeps serving and ends the
        job) nor `colo logs`, as the owner or as root."""
        job, detail = self.hostile_job("fifo")
        self.assertEqual(detail["state"], "failed")
        for user in (ALICE, None):
            began = time.monotonic()
            r = self.as_(user, "logs", job, timeout=20)
            self.assertLess(time.monotonic() - began, 10)
            self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(self.json_as(BOB, "queue")["jobs"], [])
        self.assertTrue(self.d.alive())

    def test_logs_replaced_by_a_directory_link(self):
        """A link to a directory in place of the logs is not read either."""
        job, detail = self.hostile_job("dirlink")
        self.assertEqual(detail["state"], "failed")
        self.assertTrue(self.d.alive())


class RunningJobsAsAlice(MultiUserTest, lifecycle.LifecycleTests):
    """How a system colod (root: cgroups where it can make them) runs alice's jobs."""

    def setUp(self):
        super().setUp()
        self.client_user = ALICE

    def tmpdir_for_jobs(self):
        return self.work[ALICE.name]

    def daemon_under_test(self):
        return self.d

    def logs(self, job, *flags):
        return self.colo_ok("logs", job, *flags).stdout


class Isolation(MultiUserTest):
    def submit_in_shell(self, user, shell, *args):
        """colo submit ARGS as `user`, run from a shell that first runs `shell` (umask 077,
        ulimit -n 100): the job id."""
        argv = harness.as_user(user, ["sh", "-c", shell + '; exec "$0" "$@"', harness.COLO,
                                      "submit", "--json", *args])
        r = subprocess.run(argv, env=self.client_env(user, self.d.socket, path_prefix=self.bin),
                           cwd=self.work[user.name], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return int(json.loads(r.stdout)["job"])

    def test_jobs_files_honour_the_submitters_umask(self):
        """Alice submits with umask 077: the files her job makes, and its -o copy, are hers
        alone, and bob cannot read them; `colo show` names the umask. Bob's job, submitted with
        umask 022, makes files others may read."""
        shared = self.mkdir("shared", mode=0o1777)
        make = 'echo secret > "$1/made-by-$COLO_JOB_ID"; mkdir "$1/dir-$COLO_JOB_ID"'
        job = self.submit_in_shell(ALICE, "umask 077", "-o", f"{shared}/out-%j.txt", "--",
                                   "sh", "-c", make, "sh", shared)
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "succeeded")
        for name, mode in [(f"made-by-{job}", 0o600), (f"out-{job}.txt", 0o600),
                           (f"dir-{job}", 0o700)]:
            st = os.stat(os.path.join(shared, name))
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (ALICE.uid, mode), name)
        code, out = self.run_as(BOB, "cat", os.path.join(shared, f"made-by-{job}"))
        self.assertNotEqual(code, 0, "bob read alice's file")
        self.assertNotIn("secret", out)
        self.assertIn("Umask=0077", self.as_(ALICE, "show", job).stdout)
        other = self.submit_in_shell(BOB, "umask 022", "--", "sh", "-c", make, "sh", shared)
        self.assertEqual(self.wait_as(BOB, other, TERMINAL)["state"], "succeeded")
        st = os.stat(os.path.join(shared, f"made-by-{other}"))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o644)

    def test_jobs_get_the_submitters_resource_limits_never_more_than_colods(self):
        """Alice's `ulimit -n 100 -c 0` reach her job; a hard limit above colod's own is
        lowered to colod's (colod's open files are cut to 4096 here), never raised."""
        subprocess.run(["prlimit", "--pid", str(self.d.proc.pid), "--nofile=4096:4096"],
                       check=True)
        show = 'echo "$(ulimit -Sn) $(ulimit -Hn) $(ulimit -Sc)"'
        job = self.submit_in_shell(ALICE, "ulimit -Sn 100; ulimit -Sc 0", "--", "sh", "-c",
                                   show)
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "succeeded")
        self.assertEqual(self.as_(ALICE, "logs", job).stdout.split(), ["100", "4096", "0"])
        # Her own hard limit (above colod's) stays as it was in her shell; the job has colod's.
        job = self.submit_in_shell(ALICE, "true", "--", "sh", "-c", show)
        self.assertEqual(self.wait_as(ALICE, job, TERMINAL)["state"], "succeeded")
        soft, hard, _ = self.as_(ALICE, "logs", job).stdout.split()
        self.assertEqual(hard, "4096")
        self.assertLessEqual(int(soft), 4096)


# A job that writes as fast as it can, without end.
FLOOD = "head -c 100000000 /dev/zero; echo done"


class LogLimit(MultiUserTest):
    config = dict(MultiUserTest.config, jobs={"log_limit": "1MiB"})

    def test_a_job_writing_without_end_is_stopped_at_its_log_limit(self):
        """Alice's job writes to stdout without end: it is stopped once its logs hold 1 MiB
        (jobs.log_limit), its stderr saying why; the logs and its -o copy hold no more; nothing
        of it runs on."""
        job = self.submit_as(ALICE, "-o", "out-%j.txt", "--", "sh", "-c", "yes alice")
        ended = self.wait_as(ALICE, job, TERMINAL)
        self.assertEqual(ended["state"], "failed")
        self.assertIn("reached its limit of 1048576 bytes", ended["reason"])
        out = os.path.join(self.jobs_dir, str(job), "attempt-1.out")
        err = os.path.join(self.jobs_dir, str(job), "attempt-1.err")
        self.assertEqual(os.path.getsize(out), 1 << 20)
        with open(err) as f:
            self.assertIn("reached its limit of 1048576 bytes", f.read())
        copy = os.path.join(self.work[ALICE.name], f"out-{job}.txt")
        self.assertGreaterEqual(os.path.getsize(copy), 1 << 20)
        self.assertLess(os.path.getsize(copy), (1 << 20) + 4096)
        self.assertEqual(harness.processes_with_token(self.token.split("=")[1], "yes"), [])


class FullLogFileSystem(MultiUserTest):
    def daemon_options(self):
        self.logs = self.mount_tmpfs("logs", "8m")
        jobs_dir = os.path.join(self.logs, "jobs")
        self.config = dict(self.config, jobs={"log_limit": "none"},
                           paths={"jobs_dir": jobs_dir})
        return {}

    def test_a_full_log_file_system_refuses_nobody_elses_submit(self):
        """The jobs' logs on a file system of their own (paths.jobs_dir, an 8 MiB tmpfs here),
        which alice's job fills: bob's submits are stored and his jobs run, as are alice's
        next ones."""
        job = self.submit_as(ALICE, "--", "sh", "-c", FLOOD)
        self.wait_as(ALICE, job, TERMINAL)
        st = os.statvfs(self.logs)
        self.assertLess(st.f_bavail * st.f_frsize, 64 << 10, "the log file system is not full")
        for user in (BOB, BOB, ALICE):
            other = self.submit_as(user, "--", "true")
            self.assertEqual(self.wait_as(user, other, TERMINAL)["state"], "succeeded")


class FullStateFileSystem(MultiUserTest):
    def daemon_options(self):
        fs = self.mount_tmpfs("fs", "16m")
        self.config = dict(self.config, jobs={"log_limit": "none"},
                           limits=dict(self.config["limits"], database_reserve="2MiB"))
        return {"state_dir": os.path.join(fs, "state")}

    def test_a_full_state_file_system_keeps_room_for_the_database(self):
        """The logs beside the database (the default), on a 16 MiB file system that alice's
        job fills: colod gives back the room it kept (limits.database_reserve), so bob's
        submits are still stored and his jobs run; it says so in its log."""
        reserve = os.path.join(self.d.state_dir, "reserve")
        self.assertEqual(os.stat(reserve).st_blocks * 512, 2 << 20)
        job = self.submit_as(ALICE, "--", "sh", "-c", FLOOD)
        self.wait_as(ALICE, job, TERMINAL)
        for _ in range(3):
            other = self.submit_as(BOB, "--", "true")
            self.assertEqual(self.wait_as(BOB, other, TERMINAL)["state"], "succeeded")
        self.assertIn("gave back the 2 MiB kept for the database", self.d.current_log())


class StoppedStart(MultiUserTest):
    def test_stopped_start_keeps_no_restart_from_starting(self):
        """Alice stops the child colod forks for her job at the first moment she may (right
        after it became hers, before it runs the shim): it holds no descriptor of colod's (no
        socket, no lock, no database), a colod restarted after kill -9 starts and serves, ends
        the stopped child (resumed, it would run the job a second time), whose job fails saying
        why without having run; her next job runs."""
        runs = os.path.join(self.work[ALICE.name], "runs")
        job = self.submit_as(ALICE, "--hold", "--", "sh", "-c", f"echo ran >> {runs}")
        release = []
        stopped = ptrace_stop.stop_child_when_user(
            self.d.proc.pid, ALICE.uid, lambda: release.append(subprocess.Popen(
                harness.as_user(ALICE, [harness.COLO, "release", str(job)]),
                env=self.client_env(ALICE, self.d.socket), cwd=self.work[ALICE.name],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        for p in release:
            p.wait(30)
        self.assertIsNotNone(stopped, "colod never started alice's job")
        try:
            wait_until(lambda: ptrace_stop.process_state(stopped) == "T", 5,
                       "the start to be stopped")
            held = {}
            for fd in os.listdir(f"/proc/{stopped}/fd"):
                try:
                    held[fd] = os.readlink(f"/proc/{stopped}/fd/{fd}")
                except OSError:
                    pass
            for fd, target in held.items():
                self.assertFalse(target.startswith("socket:"), f"fd {fd}: {target} ({held})")
                self.assertFalse(os.path.basename(target).startswith(("colod.lock", "colo.db",
                                                                      "history.db")),
                                 f"fd {fd}: {target} ({held})")
            for fd in ("0", "1", "2"):
                self.assertEqual(held.get(fd), "/dev/null", held)
            self.d.kill9()
            self.d.start()
            wait_until(lambda: ptrace_stop.process_state(stopped) in (None, "Z"), 10,
                       "the restarted colod to end the stopped start")
            self.assertIn("left unfinished", self.d.current_log())
            ended = self.wait_as(ALICE, job, TERMINAL)
            self.assertEqual(ended["state"], "failed")
            self.assertIn("its start was stopped", ended["reason"])
            self.assertFalse(os.path.exists(runs), "the stopped start ran the job")
            again = self.submit_as(ALICE, "--", "sh", "-c", f"echo ran >> {runs}")
            self.assertEqual(self.wait_as(ALICE, again, TERMINAL)["state"], "succeeded")
            with open(runs) as f:
                self.assertEqual(f.read(), "ran\n")
        finally:
            try:
                os.kill(stopped, signal.SIGKILL)
            except OSError:
                pass


class Connections(MultiUserTest):
    def hello(self, sock):
        return harness.request(sock, {"api": 1, "op": "hello"})

    def test_too_many_connections_from_one_user(self):
        """Bob holding limits.max_clients_per_user connections gets "too many connections" for
        the next one, while alice and root are still served; closing one lets bob in again."""
        held = harness.connect_as(self.d.socket, BOB, count=4)
        try:
            for s in held:
                reply = self.hello(s)
                self.assertTrue(reply["ok"], reply)
                self.assertEqual(reply["user"], BOB.name)
            [extra] = harness.connect_as(self.d.socket, BOB)
            with extra:
                reply = self.hello(extra)
                self.assertIsNotNone(reply, "colod closed the fifth connection without a word")
                self.assertFalse(reply["ok"])
                self.assertEqual(reply["code"], "busy")
                self.assertIn("too many connections", reply["error"])
            r = self.as_(BOB, "queue")
            self.assertEqual(r.returncode, 1)
            self.assertIn("too many connections", r.stderr)
            self.assertEqual(self.as_(ALICE, "queue").returncode, 0)
            self.assertEqual(self.as_(None, "queue").returncode, 0)
            held.pop().close()
            wait_until(lambda: self.as_(BOB, "queue").returncode == 0, 5,
                       "bob to be served after closing a connection")
        finally:
            for s in held:
                s.close()

    def test_idle_connections_are_closed(self):
        """A connection that sends nothing is closed after limits.idle_timeout (3 s here), one
        that keeps asking is not; bob's idle connections stop counting against him."""
        idle = harness.connect_as(self.d.socket, BOB, count=4)
        [busy] = harness.connect_as(self.d.socket, ALICE)
        began = time.monotonic()
        try:
            while time.monotonic() - began < 4.5:
                self.assertTrue(self.hello(busy)["ok"])
                time.sleep(0.5)
            for s in idle:
                self.assertEqual(harness.read_line(s, deadline=6), b"",
                                 "an idle connection was not closed")
            closed_after = time.monotonic() - began
            self.assertGreaterEqual(closed_after, 3)
            self.assertTrue(self.hello(busy)["ok"], "a busy connection was closed")
            self.assertEqual(self.as_(BOB, "queue").returncode, 0)
        finally:
            for s in idle + [busy]:
                s.close()


class ServedInTurn(MultiUserTest):
    """colod serves users in turn, not connections, and no request of one user costs much."""

    def test_a_user_pipelining_on_every_connection_does_not_hold_up_another(self):
        """Alice pipelines 100 queue requests (pages of 500 held jobs) on each of her 4
        connections; bob's one request, sent after all of hers, is answered after a few of hers,
        not after a turn of each of her connections (64 and more, as colod served before)."""
        array = self.submit_as(ALICE, "--hold", "--array", "0-499", "--", "true")
        conns = harness.connect_as(self.d.socket, ALICE, count=4)
        [bob] = harness.connect_as(self.d.socket, BOB)
        answered = []  # the monotonic time of each of alice's replies
        lock = threading.Lock()

        def read_replies(sock, count):
            buffered = b""
            while count:
                try:
                    chunk = sock.recv(1 << 20)
                except socket.timeout:
                    return
                if not chunk:
                    return
                buffered += chunk
                while b"\n" in buffered and count:
                    _, buffered = buffered.split(b"\n", 1)
                    count -= 1
                    with lock:
                        answered.append(time.monotonic())

        line = json.dumps({"api": 1, "op": "queue"}).encode() + b"\n"
        readers = []
        try:
            for s in conns:
                s.settimeout(60)
                reader = threading.Thread(target=read_replies, args=(s, 100))
                reader.start()
                readers.append(reader)
                s.sendall(line * 100)
            reply = harness.request(bob, {"api": 1, "op": "queue"}, deadline=60)
            bob_answered = time.monotonic()
            self.assertTrue(reply["ok"], reply)
            self.assertEqual(len(reply["jobs"]), 500)
            self.assertEqual(reply["waiting"], 500)
            for reader in readers:
                reader.join(60)
            self.assertEqual(len(answered), 400, "alice's requests were not all answered")
            before_bob = sum(1 for t in answered if t < bob_answered)
            self.assertLess(before_bob, 40, f"{before_bob} of alice's 400 requests were answered "
                            "before bob's one")
        finally:
            for s in conns + [bob]:
                s.close()
        self.assertEqual(self.as_(ALICE, "cancel", str(array)).returncode, 0)

    def test_the_queue_comes_a_page_at_a_time(self):
        """A queue request answers at most 500 jobs with where the next page starts, and counts
        every job; colo queue follows the pages (1,200 jobs here), --user too."""
        first = self.submit_as(ALICE, "--hold", "--array", "0-999", "--", "true")
        self.submit_as(BOB, "--hold", "--array", "0-199", "--", "true")
        [s] = harness.connect_as(self.d.socket, BOB)
        with s:
            page = harness.request(s, {"api": 1, "op": "queue"})
            self.assertEqual(len(page["jobs"]), 500)
            self.assertEqual((page["running"], page["waiting"]), (0, 1200))
            self.assertEqual(page["next"], first + 499)
            rest = harness.request(s, {"api": 1, "op": "queue", "after": page["next"],
                                       "limit": 10})
            self.assertEqual([j["id"] for j in rest["jobs"]], list(range(first + 500, first + 510)))
            mine = harness.request(s, {"api": 1, "op": "queue", "user": BOB.name})
            self.assertEqual(len(mine["jobs"]), 200)
            self.assertNotIn("next", mine)
            refused = harness.request(s, {"api": 1, "op": "queue", "limit": 501})
            self.assertFalse(refused["ok"])
            self.assertIn("limit", refused["error"])
        everyone = self.json_as(BOB, "queue")["jobs"]
        self.assertEqual(len(everyone), 1200)
        self.assertEqual(len({j["id"] for j in everyone}), 1200)
        self.assertEqual(len(self.json_as(BOB, "queue", "--user", ALICE.name)["jobs"]), 1000)

    def test_a_thousand_holds_and_releases_are_one_request_each(self):
        """Releasing and holding again 1,000 tasks (behind a running job, so that none starts)
        answers every one of them, each as it is now, and a restart finds them as they were
        left (stored, all of them)."""
        blocker, release = self.running_job(ALICE)
        first = self.submit_as(ALICE, "--hold", "--after", str(blocker), "--array", "0-999",
                               "--", "true")
        ids = list(range(first, first + 1000))
        [s] = harness.connect_as(self.d.socket, ALICE)
        with s:
            for action, state in (("release", "waiting for its dependencies"), ("hold", "held")):
                control = {"api": 1, "op": "control", "action": action, "jobs": ids}
                reply = harness.request(s, control, deadline=60)
                self.assertTrue(reply["ok"], reply)
                self.assertEqual({r.get("state", r.get("error")) for r in reply["results"]},
                                 {state})
                self.assertEqual(len(reply["results"]), 1000)
        self.d.kill9()
        self.d.start()
        jobs = [j for j in self.json_as(ALICE, "queue")["jobs"] if j["id"] != blocker]
        self.assertEqual(len(jobs), 1000)
        self.assertTrue(all("held" in j["reason"] for j in jobs), jobs[0])
        self.assertEqual(self.as_(ALICE, "cancel", str(first)).returncode, 0)
        self.assertEqual([j["id"] for j in self.json_as(ALICE, "queue")["jobs"]], [blocker])
        self.release(release)


class AllConnections(MultiUserTest):
    config = {"limits": {"max_clients": 3, "max_clients_per_user": 2}}

    def test_pool_full(self):
        """limits.max_clients connections in all: the next user is told colod is busy, and root
        is still served."""
        held = harness.connect_as(self.d.socket, BOB, count=2)
        held += harness.connect_as(self.d.socket, ALICE, count=1)
        try:
            for s in held:
                self.assertTrue(harness.request(s, {"api": 1, "op": "hello"})["ok"])
            r = self.as_(ALICE, "queue")
            self.assertEqual(r.returncode, 1)
            self.assertIn("too many connections", r.stderr)
            self.assertEqual(self.as_(None, "queue").returncode, 0)
        finally:
            for s in held:
                s.close()
        wait_until(lambda: self.as_(ALICE, "queue").returncode == 0, 5, "alice to be served")


class PersonalDaemons(harness.E2ETest):
    """colod started by alice: hers alone."""

    def setUp(self):
        super().setUp()
        self.home = self.mkdir("alice-home", user=ALICE)
        self.runtime = self.mkdir("alice-run", user=ALICE, mode=0o700)

    def personal(self, runtime=None, start=True, **kwargs):
        env = {"PATH": harness.SYSTEM_PATH, "HOME": self.home, "LANG": "C.UTF-8"}
        if runtime:
            env["XDG_RUNTIME_DIR"] = runtime
        socket_path = kwargs.pop("socket_path", os.path.join(runtime or "/nonexistent", "colo",
                                                             "colod.sock"))
        return self.colod(start=start, user=ALICE, defaults=True, env=env, socket_path=socket_path,
                          root=self.home, **kwargs)

    def colod(self, start=True, root=None, **kwargs):
        d = harness.Colod(root or self.tmp, **kwargs)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def test_refuses_other_users(self):
        """Alice's personal colod: socket 0600 in a 0700 directory of hers; bob cannot connect,
        root is refused by colod itself ("serves only its owner"); alice is served."""
        d = self.personal(self.runtime)
        st = os.stat(d.socket)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (ALICE.uid, 0o600))
        st = os.stat(os.path.dirname(d.socket))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (ALICE.uid, 0o700))
        with self.assertRaises(OSError) as caught:
            harness.connect_as(d.socket, BOB)
        self.assertIn(caught.exception.errno, (errno.EACCES, errno.EPERM))
        [s] = harness.connect_as(d.socket, None)
        with s:
            reply = harness.request(s, {"api": 1, "op": "hello"})
        self.assertIsNotNone(reply, "colod closed root's connection without a word")
        self.assertFalse(reply["ok"])
        self.assertEqual(reply["code"], "permission_denied")
        self.assertIn("serves only its owner", reply["error"])
        env = {"PATH": harness.SYSTEM_PATH, "HOME": self.home, "XDG_RUNTIME_DIR": self.runtime}
        r = self.colo("queue", user=ALICE, env=env, cwd=self.home)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(d.alive())

    def test_socket_directory_made_by_another_user(self):
        """Bob made the directory alice's personal socket goes in (in a shared 1777 directory):
        her colod refuses to start, saying whose it is, and changes nothing of it."""
        shared = self.mkdir("shared", mode=0o1777)
        os.chmod(shared, 0o1777)
        trap = os.path.join(shared, "colo")
        code, out = self.run_as_bob("mkdir", "-m", "0777", trap)
        self.assertEqual(code, 0, out)
        d = self.personal(shared, start=False)
        d.spawn()
        self.assertEqual(d.proc.wait(harness.START_DEADLINE), 1)
        log = d.log()
        self.assertIn(trap, log)
        self.assertIn(f"uid {BOB.uid}", log)
        st = os.stat(trap)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (BOB.uid, 0o777))
        self.assertEqual(os.listdir(trap), [])
        self.assertEqual(stat.S_IMODE(os.stat(shared).st_mode), 0o1777)

    def test_tmp_fallback_directory_made_by_another_user(self):
        """Without XDG_RUNTIME_DIR the personal socket is /tmp/colo-<uid>/colod.sock: if bob made
        that directory first, alice's colod refuses to start with a message; /tmp keeps its
        mode."""
        trap = f"/tmp/colo-{ALICE.uid}"
        if os.path.lexists(trap):
            self.skipTest(f"{trap} exists already; not touching it")
        self.addCleanup(shutil.rmtree, trap, True)
        code, out = self.run_as_bob("mkdir", "-m", "0755", trap)
        self.assertEqual(code, 0, out)
        d = self.personal(None, start=False, socket_path=f"{trap}/colod.sock")
        d.spawn()
        self.assertEqual(d.proc.wait(harness.START_DEADLINE), 1)
        self.assertIn(f"{trap} belongs to uid {BOB.uid}", d.log())
        self.assertEqual(os.listdir(trap), [])
        self.assertEqual(stat.S_IMODE(os.stat("/tmp").st_mode), 0o1777)
        # Without bob's directory there, alice's colod makes it hers and colo finds it there.
        os.rmdir(trap)
        d.start()
        st = os.stat(trap)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (ALICE.uid, 0o700))
        env = {"PATH": harness.SYSTEM_PATH, "HOME": self.home}
        r = self.colo("queue", "--json", user=ALICE, env=env, cwd=self.home)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat("/tmp").st_mode), 0o1777)

    def test_shared_parent_keeps_its_mode(self):
        """A personal colod whose socket directory it creates in a 1777 directory makes it 0700
        and leaves the parent's mode and sticky bit alone, also after it stops."""
        shared = self.mkdir("shared", mode=0o1777)
        os.chmod(shared, 0o1777)
        d = self.personal(shared)
        st = os.stat(os.path.join(shared, "colo"))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (ALICE.uid, 0o700))
        self.assertEqual(stat.S_IMODE(os.stat(shared).st_mode), 0o1777)
        self.assertEqual(d.stop(), 0)
        self.assertEqual(stat.S_IMODE(os.stat(shared).st_mode), 0o1777)

    def test_socket_directory_writable_by_others(self):
        """Alice's own socket directory, but writable by others: refused."""
        loose = self.mkdir("alice-run", "colo", user=ALICE, mode=0o777)
        os.chmod(loose, 0o777)
        d = self.personal(self.runtime, start=False)
        d.spawn()
        self.assertEqual(d.proc.wait(harness.START_DEADLINE), 1)
        self.assertIn("writable by others", d.log())

    def run_as_bob(self, *argv):
        r = subprocess.run(harness.as_user(BOB, list(argv)), capture_output=True, timeout=30,
                           env={"PATH": harness.SYSTEM_PATH}, cwd="/")
        return r.returncode, (r.stdout + r.stderr).decode(errors="replace")


if __name__ == "__main__":
    harness.main()
