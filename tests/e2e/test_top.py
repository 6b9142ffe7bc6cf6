#!/usr/bin/env python3
"""`colo top` through the real binaries, in a detached tmux session of a fixed size: the GPU bars
of jobs using fake GPU memory, a waiting job's reason, recent events; the keys (sort, filter,
cancel with its confirmation, colod refusing another user's job); colod going away and coming
back; q, Ctrl-C and SIGTERM ending it with status 0 and the terminal as it was. Skipped (77)
where tmux is not installed.
"""

import json
import os
import pty
import re
import shlex
import shutil
import signal
import subprocess
import time

import harness
from harness import wait_until

GIB = 1 << 30
WIDTH, HEIGHT = 100, 30

# Uses $2 bytes on its GPU (written to the fake GPUs' directory $1) until $3 exists.
USE_MEMORY = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
echo "$gpu $2" > "$1/$$"
i=0
while [ ! -e "$3" ]; do
  i=$((i + 1))
  if [ $i -gt 2400 ]; then exit 3; fi
  sleep 0.05
done
"""


class TopTest(harness.OneColodTest):
    def setUp(self):
        super().setUp()
        # As root, colo top runs as an unprivileged user, so that colod's refusal to cancel
        # another user's (root's) job shows; otherwise as the caller.
        self.user = harness.unprivileged_user() if harness.is_root() else None
        self.bin = self.mkdir("bin")
        self.work = self.mkdir("work", user=self.user)
        self.gpu_dir = self.mkdir("fake-gpus", mode=0o777)
        self.write(os.path.join(self.bin, "use-memory"), USE_MEMORY, 0o755)
        self.release = os.path.join(self.gpu_dir, "release")
        self.daemon = self.colod(extra_args=["--fake-gpu-dir", self.gpu_dir])
        self.tmux_socket = os.path.join(self.tmp, "tmux.sock")
        self.addCleanup(self.stop_tmux)

    def colo(self, *args, **kwargs):
        kwargs.setdefault("user", self.user)
        return super().colo(*args, **kwargs)

    # --- tmux ---

    def tmux(self, *args, check=True):
        result = subprocess.run(["tmux", "-S", self.tmux_socket, *args], capture_output=True,
                              text=True, timeout=30)
        if check and result.returncode != 0:
            self.fail(f"tmux {' '.join(args)}: {result.stderr}")
        return result

    def stop_tmux(self):
        if os.path.exists(self.tmux_socket):
            self.tmux("kill-server", check=False)

    def start_top(self, session, *args):
        """`colo top ARGS` in a new detached session of WIDTH x HEIGHT, as the test's user; when
        it ends the shell prints its status and saves `stty -a` (the terminal it left)."""
        env = self.client_env(self.user, self.daemon.socket, None, self.bin)
        env["TERM"] = "screen"
        argv = harness.as_user(self.user, [harness.COLO, "top", *args])
        stty = os.path.join(self.tmp, f"stty-{session}")
        # The shell outlives a Ctrl-C meant for colo top (a trap, unlike an ignored signal, is
        # not inherited).
        script = (f"trap 'true' INT; env -i {' '.join(shlex.quote(f'{k}={v}') for k, v in env.items())} "
                  f"{' '.join(shlex.quote(a) for a in argv)}; echo \"top-exit=$?\"; "
                  f"stty -a > {shlex.quote(stty)}; sleep 600")
        self.tmux("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT),
                  "sh", "-c", script)
        return stty

    def screen(self, session):
        return self.tmux("capture-pane", "-p", "-t", session).stdout

    def wait_screen(self, session, predicate, what, deadline=20):
        last = {}

        def check():
            last["screen"] = self.screen(session)
            return predicate(last["screen"])

        try:
            return wait_until(check, deadline, what, 0.1)
        except AssertionError as e:
            raise AssertionError(f"{e}; the screen:\n{last.get('screen')}")

    def wait_text(self, session, text, deadline=20):
        return self.wait_screen(session, lambda s: text in s and s, repr(text), deadline)

    def keys(self, session, *keys):
        self.tmux("send-keys", "-t", session, *keys)

    def assert_restored(self, session, stty):
        """colo top exited with 0 and left the terminal cooked, echoing, out of its screen."""
        self.wait_text(session, "top-exit=0")
        def saved():
            if not os.path.exists(stty):
                return None
            with open(stty) as f:
                return f.read()

        settings = wait_until(saved, 10, "stty -a after colo top")
        words = settings.split()
        for flag in ("icanon", "echo", "icrnl", "opost"):
            self.assertIn(flag, words, settings)
        self.assertNotIn("RECENT EVENTS", self.screen(session))

    def top_pid(self, session):
        """The pid of colo top: the child of the session's shell."""
        shell = int(self.tmux("display-message", "-p", "-t", session, "#{pane_pid}").stdout)
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == shell:
                return int(entry)
        self.fail("colo top is not running")

    # --- Jobs ---

    def submit_using(self, name, plan_gib, use_gib, **kwargs):
        return self.submit("--name", name, "--mem", f"{plan_gib}GiB", "--share", "plain", "--",
                           "use-memory", self.gpu_dir, str(use_gib * GIB), self.release, **kwargs)

    def test_top_shows_gpus_queue_events_and_its_keys_work(self):
        train = self.submit_using("trainA", 30, 10)
        self.wait_state(train, "running")
        evaluate = self.submit_using("evalB", 30, 5)
        self.wait_state(evaluate, "running")
        root_job = None
        if self.user is not None:
            root_job = self.submit_using("rootjob", 30, 5, user=harness.current_user())
            self.wait_state(root_job, "running", user=harness.current_user())
        big = self.submit_using("bigC", 70, 1)  # 70 GiB fits on neither GPU beside 30 GiB
        queue = self.colo_json("queue")
        waiting = [j for j in queue["jobs"] if j["id"] == big][0]
        self.assertEqual(waiting["state"], "queued", waiting)
        reason = waiting["reason"]
        self.assertTrue(reason)
        # Job A's 10 GiB show in the sample, and its 30 GiB reservation.
        wait_until(lambda: any(j["id"] == train and j["used"] >= 10 * GIB
                               for g in self.colo_json("gpus")["gpus"] for j in g["jobs"]),
                   20, "job A's memory in colo gpus")

        stty = self.start_top("top", "-d", "0.5")
        user = self.user.name if self.user else harness.current_user().name
        user = user if len(user) <= 8 else user[:7] + "+"  # as its 8-column cell shows it
        # The bar of job A's GPU: its use (A) then the rest of its reservation (a); the legend.
        screen = self.wait_screen("top", lambda s: re.search(r"\[A+a+", s) and s,
                                  "job A's memory bar")
        self.assertIn(f"A={train} {user} trainA 10.0/30.0G", screen)
        self.assertRegex(screen, r"SM +(-|\d+%)")
        # The waiting job and why (as colod says it, as far as the row has room for it).
        self.assertRegex(screen, rf">? +{big} .*PD .*\({re.escape(reason[:30])}")
        # A recent event: job A started.
        self.assertIn("RECENT EVENTS", screen)
        self.assertRegex(screen, rf"\d\d:\d\d:\d\d +{train} {re.escape(user)} +started")
        self.assertIn("sort:id", screen)
        if root_job is not None:  # another user's events without their detail
            self.assertRegex(screen, rf" {root_job} root +started +\(private\)")

        # s: the next order.
        self.keys("top", "s")
        self.wait_text("top", "sort:user")
        # /: only job C is listed, and selected.
        self.keys("top", "/", "bigC", "Enter")
        screen = self.wait_text("top", "filter:bigC")
        self.wait_text("top", f"job {big} waits: {reason[:40]}")
        self.assertNotRegex(screen, rf"\n[ >] +{train} {re.escape(user)} +trainA")
        # c on one's own job, then y: colod cancels it.
        self.keys("top", "c")
        self.wait_text("top", f"cancel job {big} (bigC)? y/n")
        self.keys("top", "y")
        self.wait_state(big, "cancelled")
        self.wait_screen("top", lambda s: re.search(rf"job {big}: (cancelling|cancelled)", s),
                         "the cancel's answer")
        self.wait_screen("top", lambda s: re.search(rf"{big} +{re.escape(user)} +cancelled",
                                                    s), "the cancel among the recent events")
        if root_job is not None:
            # Another user's job: colod refuses, and colo top says why.
            self.keys("top", "/", "Escape")
            self.keys("top", "/", "rootjob", "Enter")
            self.wait_text("top", "filter:rootjob")
            self.keys("top", "c")
            self.wait_text("top", f"cancel job {root_job} (rootjob)? y/n")
            self.keys("top", "y")
            self.wait_text("top", f"cannot cancel job {root_job}: job {root_job} belongs to root")
            self.assertEqual(self.show(root_job, user=harness.current_user())["state"], "running")

        # colod goes away: the view says so and keeps trying; it comes back.
        self.assertEqual(self.daemon.stop(), 0)
        self.wait_text("top", "colod unreachable, retrying")
        self.daemon.start()
        self.wait_screen("top", lambda s: "colod unreachable" not in s and "RECENT EVENTS" in s,
                         "the view to recover")

        self.keys("top", "q")
        self.assert_restored("top", stty)

    def test_ctrl_c_and_sigterm_end_it_cleanly(self):
        stty = self.start_top("int")
        self.wait_text("int", "RECENT EVENTS")
        self.keys("int", "C-c")
        self.assert_restored("int", stty)

        stty = self.start_top("term")
        self.wait_text("term", "RECENT EVENTS")
        os.kill(self.top_pid("term"), signal.SIGTERM)
        self.assert_restored("term", stty)

    def test_array_tasks_are_named_as_tasks(self):
        """A task of an array is ARRAY_TASK in colo top's GPU legend, job list and events."""
        array = self.submit("--array", "0-1", "--name", "sweep", "--mem", "4GiB", "--share",
                            "exclusive", "--", "use-memory", self.gpu_dir, str(GIB), self.release)
        for job in (array, array + 1):
            self.wait_state(job, "running")
        stty = self.start_top("array")
        screen = self.wait_text("array", f"{array}_1 ")
        self.assertRegex(screen, rf"[AB]={array}_1 ")  # a GPU's legend
        self.assertRegex(screen, rf"\n>? *{array}_0 +\S+ +sweep ")  # the job list
        self.keys("array", "q")
        self.assert_restored("array", stty)
        self.write(self.release, "")

    def test_a_terminal_that_hangs_up_ends_it(self):
        """The terminal goes away (its pty closed) under a session leader that ignores SIGHUP
        and so never passes it on: colo top sees the hangup and ends."""
        env = self.client_env(self.user, self.daemon.socket, {"TERM": "xterm"}, self.bin)
        argv = harness.as_user(self.user, ["sh", "-c", f"trap '' HUP; {harness.COLO} top"])
        pid, master = pty.fork()
        if pid == 0:  # the child: the session leader on the new terminal
            try:
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        token = self.token.split("=", 1)[1]

        def top_processes():
            found = []
            for p in harness.processes_with_token(token):
                try:
                    with open(f"/proc/{p}/cmdline", "rb") as f:
                        if f.read().split(b"\0")[1:3] == [b"top", b""]:
                            found.append(p)
                except OSError:
                    pass
            return found

        try:
            wait_until(top_processes, 10, "colo top to start")
            time.sleep(0.5)  # drawing
            os.close(master)
            master = None
            wait_until(lambda: not top_processes(), 10, "colo top to end after the hangup")
            wait_until(lambda: os.waitpid(pid, os.WNOHANG)[0] == pid, 10, "its shell to end")
            pid = None
        finally:
            if master is not None:
                os.close(master)
            if pid is not None:
                for p in top_processes():
                    os.kill(p, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)

    def test_without_a_terminal_it_says_so(self):
        r = self.colo("top")
        self.assertEqual(r.returncode, 1)
        self.assertIn("colo: top needs a terminal", r.stderr)


if __name__ == "__main__":
    if shutil.which("tmux") is None:
        harness.skip_file("tmux is not installed")
    harness.main()
