"""How colod runs a job (README, "Running jobs"), as a mixin for a test class that provides
`submit`, `wait_state`, `logs`, `tmpdir_for_jobs` and `daemon_under_test`: its session, GPUs and
environment, processes it leaves behind or detaches, cancel, out-of-memory recovery.

test_documented runs these under a personal colod (an unprivileged user: attempts tracked by
session and descendants), test_multi_user under a system colod as root (cgroups where it can).
"""

import os
import time

from harness import wait_until

TERMINAL = {"succeeded", "failed", "cancelled", "lost"}

OOM_ONCE = """#!/bin/sh
# Crashes out of GPU memory on its first attempt, as PyTorch reports it; succeeds after.
if [ "$COLO_ATTEMPT" = 1 ]; then
  echo "epoch 1"
  cat >&2 <<'EOF'
Traceback (most recent call last):
  File "train.py", line 12, in <module>
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.25 GiB is free.
EOF
  exit 1
fi
echo "attempt $COLO_ATTEMPT ok"
"""


def pid_alive(pid):
    """Whether `pid` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


class LifecycleTests:
    def lifecycle_file(self, name):
        return os.path.join(self.tmpdir_for_jobs(), name)

    def read_int(self, path):
        def written():
            try:
                with open(path) as f:
                    return f.read().strip()
            except FileNotFoundError:
                return ""
        return int(wait_until(written, 10, f"{path} to be written").split()[0])

    def test_session_gpus_and_environment(self):
        """The job runs in a session of its own led by its attempt's process, with the client's
        environment except CUDA_VISIBLE_DEVICES (its GPUs' UUIDs) and COLO_JOB_ID/COLO_ATTEMPT
        (colod's, whatever the client had)."""
        job = self.submit(
            "--gpus", "2", "--", "sh", "-c",
            'echo "sid=$(cut -d" " -f6 /proc/self/stat) cvd=$CUDA_VISIBLE_DEVICES '
            'id=$COLO_JOB_ID attempt=$COLO_ATTEMPT mine=$MY_SETTING"; cat /proc/self/cgroup',
            extra_env={"CUDA_VISIBLE_DEVICES": "7", "COLO_JOB_ID": "999", "COLO_ATTEMPT": "5",
                       "MY_SETTING": "kept with spaces"})
        detail = self.assert_succeeded(job)
        [attempt] = detail["attempt_list"]
        out = self.logs(job).splitlines()
        self.assertEqual(out[0].split(" mine=")[0],
                         f"sid={attempt['pid']} cvd={','.join(attempt['gpu_uuids'])} "
                         f"id={job} attempt=1")
        self.assertEqual(out[0].split(" mine=")[1], "kept with spaces")
        self.assertEqual(sorted(attempt["gpu_uuids"]), ["GPU-fake-0000", "GPU-fake-0001"])
        if "cgroup v2: each attempt" in self.daemon_under_test().log():
            self.assertRegex(out[-1], rf"/colo-[0-9a-f]+-job-{job}-1$", "not in its own cgroup")

    def test_leftover_processes_end_with_the_job(self):
        """A process the job leaves running in the background is ended (leftover_grace) before
        the job counts as ended."""
        pid_file = self.lifecycle_file(f"bg-{time.monotonic_ns()}")
        job = self.submit("--", "sh", "-c",
                          f'sleep 600 & echo $! > {pid_file}; echo left it')
        self.assert_succeeded(job)
        pid = self.read_int(pid_file)
        self.assertFalse(pid_alive(pid), "the job's background process outlived it")

    def test_cancel_ends_processes_that_left_the_session(self):
        """`colo cancel` ends every process of the job, also one that started a session of its
        own and ignores SIGTERM."""
        pid_file = self.lifecycle_file(f"detached-{time.monotonic_ns()}")
        job = self.submit("--", "sh", "-c",
                          f"setsid sh -c 'trap \"\" TERM; echo $$ > {pid_file}; "
                          f"exec sleep 600' & exec sleep 600")
        self.wait_state(job, "running")
        pid = self.read_int(pid_file)
        self.assertTrue(pid_alive(pid))
        self.colo_ok("cancel", job)
        self.assertEqual(self.wait_state(job, TERMINAL)["state"], "cancelled")
        wait_until(lambda: not pid_alive(pid), 5, "the detached process to be killed")

    def test_out_of_memory_is_recovered(self):
        """An attempt whose terminal error is a GPU out-of-memory error is re-queued with a
        larger need and run again (attempt 2), which succeeds; a plain failure is final."""
        script = self.lifecycle_file("oom-once.sh")
        with open(script, "w") as f:
            f.write(OOM_ONCE)
        os.chmod(script, 0o755)
        job = self.submit("--mem", "4GiB", "--", script)
        detail = self.assert_succeeded(job)
        self.assertEqual([a["exit_kind"] for a in detail["attempt_list"]],
                         ["out-of-memory", "success"])
        self.assertEqual(detail["oom_count"], 1)
        self.assertGreater(detail["memory"], 4 << 30, "the need was not raised")
        self.assertEqual(self.logs(job), "attempt 2 ok\n")
        self.assertIn("out-of-memory", [e["kind"] for e in detail["events"]])
        failing = self.submit("--", "sh", "-c", "echo 'RuntimeError: shape mismatch' >&2; exit 1")
        detail = self.wait_state(failing, TERMINAL)
        self.assertEqual(detail["state"], "failed")
        self.assertEqual(len(detail["attempt_list"]), 1)
