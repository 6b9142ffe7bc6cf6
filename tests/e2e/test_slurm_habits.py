#!/usr/bin/env python3
"""What a Slurm user types, through the real binaries: #SBATCH lines in a job script, sbatch's
option names (-J, --job-name, -G, --gres=gpu:N, --parsable), options after the job's command,
unknown options named with what Slurm means by them, Slurm's state words and codes, sacct's
field names and filters in colo history, colo show's scontrol fields, colo eff (like seff),
array tasks named ARRAY_TASK everywhere, and sizes in any case (12g)."""

import json
import os
import re
import time

import harness
from harness import wait_until

GIB = 1 << 30

# Runs until the file $1 exists.
WAIT_FOR = """#!/bin/sh
while [ ! -e "$1" ]; do sleep 0.05; done
"""

# Fails as PyTorch does on its first attempt, succeeds on its second.
OOM_ONCE = """#!/bin/sh
if [ "$COLO_ATTEMPT" = 1 ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB." >&2
  exit 1
fi
"""

# Uses $2 bytes of its GPU and SM activity $3 (written to the fake GPUs' directory $1) for $4 s.
COMPUTE = """#!/bin/sh
gpu=$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0)
echo "$gpu $2" > "$1/$$"
echo "$3" > "$1/smact-$gpu"
sleep "$4"
rm -f "$1/smact-$gpu" "$1/$$"
"""

SBATCH_SCRIPT = """#!/bin/bash
#SBATCH --job-name=bert-ft
#SBATCH --gres=gpu:2
#SBATCH -t 0:30
#SBATCH -o slurm-%x-%j.out
#SBATCH --partition=gpu
#SBATCH --mem=64G
#SBATCH -c 8
echo "gpus=$CUDA_VISIBLE_DEVICES args=$*"
"""


class SlurmHabits(harness.OneColodTest):
    def setUp(self):
        super().setUp()
        self.bin = self.mkdir("bin")
        self.work = self.mkdir("work", mode=0o777)
        self.gpu_dir = self.mkdir("fake-gpus", mode=0o777)
        self.write(os.path.join(self.bin, "wait-for"), WAIT_FOR, 0o755)
        self.write(os.path.join(self.bin, "oom-once"), OOM_ONCE, 0o755)
        self.write(os.path.join(self.bin, "compute"), COMPUTE, 0o755)
        self.daemon = self.colod(extra_args=["--fake-gpu-dir", self.gpu_dir],
                                 config={"history": {"flush_interval": "0.2s"}})

    def finished(self, job):
        return self.wait_state(job, {"succeeded", "failed", "cancelled", "timeout"})

    # --- Job scripts and sbatch's options ---

    def test_sbatch_lines_are_read_and_the_rest_named(self):
        """An sbatch script asking for 2 GPUs, a time limit, a name and an output file runs on
        2 GPUs with all of them; colo names each #SBATCH option it does not read (Slurm's
        --mem, host memory, is not taken for GPU memory); words after the script are its
        arguments, as with sbatch."""
        script = self.write(os.path.join(self.work, "train.sbatch"), SBATCH_SCRIPT, 0o755)
        r = self.colo_ok("submit", script, "--epochs", "3")
        job = int(re.fullmatch(r"Submitted job (\d+)\n", r.stdout).group(1))
        warnings = r.stderr.splitlines()
        self.assertEqual(len(warnings), 3, r.stderr)
        for line, option in zip(warnings, ("--partition", "--mem", "-c")):
            self.assertRegex(line, rf"^colo: warning: {re.escape(script)}:\d+: #SBATCH "
                                   rf"{option} ignored: ")
        self.assertIn("host memory", warnings[1])
        detail = self.finished(job)
        self.assertEqual(detail["state"], "succeeded")
        self.assertEqual(detail["name"], "bert-ft")
        self.assertEqual(detail["gpus"], 2)
        self.assertEqual(detail["time_limit_s"], 30)
        self.assertIsNone(detail.get("memory"))
        self.assertEqual(len(detail["attempt_list"][0]["gpu_uuids"]), 2)
        with open(os.path.join(self.work, f"slurm-bert-ft-{job}.out")) as f:
            self.assertRegex(f.read(), r"^gpus=GPU-\S+,GPU-\S+ args=--epochs 3\n$")
        show = self.colo_ok("show", job).stdout
        self.assertIn("TimeLimit=0:00:30", show)

    def test_sbatch_option_names_and_parsable(self):
        """-J and --job-name name the job, -G and --gres=gpu:N ask for GPUs, --parsable prints
        the id alone (an array's too), and a command needs no -- when colo's options come
        first."""
        r = self.colo_ok("submit", "--parsable", "-J", "short-name", "--gres=gpu:2", "sh", "-c",
                         'echo "$0"', "--flag")
        self.assertRegex(r.stdout, r"^\d+\n$")
        job = int(r.stdout)
        detail = self.finished(job)
        self.assertEqual((detail["name"], detail["gpus"]), ("short-name", 2))
        self.assertEqual(detail["command"], ["sh", "-c", 'echo "$0"', "--flag"])
        self.assertEqual(self.colo_ok("logs", job).stdout, "--flag\n")
        job = int(self.colo_ok("submit", "--parsable", "--job-name=long-name", "-G", "1",
                               "--", "true").stdout)
        self.assertEqual(self.finished(job)["name"], "long-name")
        r = self.colo_ok("submit", "--parsable", "--array", "0-1", "true")
        array = int(r.stdout)
        self.assertEqual(self.finished(array)["array_job"], array)
        r = self.colo("submit", "--gres=gpu:a100:1", "--parsable", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_unknown_options_say_what_slurm_meant(self):
        """An option colo does not have: exit 2, "unknown option X" with what Slurm means by it
        and where a job's own options go; colod is not asked."""
        cases = [(("submit", "--partition", "gpu", "job.sh"), "--partition",
                  "there are no partitions"),
                 (("submit", "-N", "2", "--", "true"), "-N", "ask for its GPUs with --gpus N"),
                 (("submit", "--mem-per-gpu=10G", "true"), "--mem-per-gpu", "host memory"),
                 (("submit", "--exclusive", "true"), "--exclusive", "--share exclusive"),
                 (("submit", "--frobnicate", "true"), "--frobnicate", None),
                 (("queue", "--long"), "--long", None)]
        for args, option, hint in cases:
            with self.subTest(args=args):
                r = self.colo(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                first = r.stderr.splitlines()[0]
                self.assertTrue(first.startswith(f"colo {args[0]}: unknown option {option}"),
                                first)
                if hint:
                    self.assertIn(f"(Slurm's {option}: ", first)
                    self.assertIn(hint, first)
                if args[0] == "submit":
                    self.assertIn("-- marks where it starts: colo submit [options] -- CMD ARGS",
                                  r.stderr)
                self.assertIn(f"colo {args[0]} --help lists its options", r.stderr)
        self.assertEqual(self.colo_json("queue")["jobs"], [])

    def test_sizes_in_any_case(self):
        """--mem 12g and #COLO --mem=2gib, as Slurm users write sizes."""
        job = self.submit("--mem", "12g", "--", "true")
        self.assertEqual(self.finished(job)["memory"], 12 * GIB)
        script = self.write(os.path.join(self.work, "lower.sh"),
                            "#!/bin/sh\n#COLO --mem=2gib\ntrue\n", 0o755)
        job = self.submit(script)
        self.assertEqual(self.finished(job)["memory"], 2 * GIB)

    # --- States ---

    def test_states_in_slurms_words_and_codes(self):
        """%T and %t say PENDING/PD, RUNNING/R, COMPLETED/CD, FAILED/F, CANCELLED/CA,
        TIMEOUT/TO as Slurm does; a job waiting to run again after running out of GPU memory is
        RECOVERING/RO (colo's own: Slurm's RQ is a requeued job); colo show says State= in
        the same words."""
        release = os.path.join(self.work, "release")
        blocker = self.submit("--gpus", "2", "--share", "exclusive", "--", "wait-for", release)
        self.wait_state(blocker, "running")
        waiting = self.submit("--mem", "1GiB", "--share", "plain", "--", "oom-once")
        fmt = ("queue", "--noheader", "--format", "%i %t %T")
        rows = dict(line.split(" ", 1) for line in self.colo_ok(*fmt).stdout.splitlines())
        self.assertEqual(rows[str(blocker)], "R RUNNING")
        self.assertEqual(rows[str(waiting)], "PD PENDING")
        self.write(release, "")
        self.assertEqual(self.finished(blocker)["state"], "succeeded")
        self.assertEqual(self.finished(waiting)["state"], "succeeded")
        failed = self.submit("--", "sh", "-c", "exit 3")
        cancelled = self.submit("--hold", "--", "true")
        self.colo_ok("cancel", cancelled)
        timeout = self.submit("-t", "0:1", "--", "sleep", "30")
        for job in (failed, cancelled, timeout):
            self.finished(job)
        rows = dict(line.split(" ", 1) for line in self.colo_ok(
            "history", "--noheader", "--format", "%i %t %T").stdout.splitlines())
        self.assertEqual(rows[str(blocker)], "CD COMPLETED")
        self.assertEqual(rows[str(failed)], "F FAILED")
        self.assertEqual(rows[str(cancelled)], "CA CANCELLED")
        self.assertEqual(rows[str(timeout)], "TO TIMEOUT")
        self.assertIn(f"JobId={timeout} Name=sleep", self.colo_ok("show", timeout).stdout)
        self.assertIn("State=TIMEOUT", self.colo_ok("show", timeout).stdout)
        events = self.show(waiting)["events"]
        self.assertTrue(any(e["kind"] == "out-of-memory" for e in events), events)
        legend = self.colo_ok("queue", "--help").stdout
        self.assertRegex(legend, r"\n  RO  RECOVERING  ran out of GPU memory")
        self.assertRegex(legend, r"\n  RQ  REQUEUED    handed back to Slurm")

    # --- colo history ---

    def test_history_takes_sacct_names_and_filters(self):
        """--format JobID,JobName%12,State,Elapsed (sacct's names, a width after %) and
        -s, -u, -j, --name, -S and -E select as sacct does; a format of unknown words is
        refused, not printed literally on every row."""
        ok = self.submit("--name", "good", "--", "true")
        self.finished(ok)
        time.sleep(1.1)
        middle = time.time()
        bad = self.submit("--name", "bad", "--", "sh", "-c", "exit 2")
        array = self.submit("--name", "sweep", "--array", "0-2", "--", "true")
        for job in (bad, array, array + 1, array + 2):
            self.finished(job)
        out = self.colo_ok("history", "--format", "JobID,JobName%12,State,Elapsed,ExitCode")
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["JobID", "JobName", "State", "Elapsed", "ExitCode"])
        rows = {l.split()[0]: l.split()[1:] for l in lines[1:]}
        self.assertEqual(rows[str(bad)][:2], ["bad", "FAILED"])
        self.assertEqual(rows[str(bad)][-1], "2:0")
        self.assertEqual(rows[f"{array}_1"][:2], ["sweep", "COMPLETED"])
        self.assertEqual(lines[0].index("State"), len("JobID".ljust(12)) + 1 + 13)

        def ids(*args):
            text = self.colo_ok("history", "--noheader", "--format", "%i", *args).stdout
            return text.split()

        self.assertEqual(ids("-s", "F"), [str(bad)])
        self.assertEqual(ids("--state", "failed,CD", "--name", "good,bad"), [str(bad), str(ok)])
        self.assertEqual(ids("-j", str(array)), [f"{array}_2", f"{array}_1", f"{array}_0"])
        self.assertEqual(ids("-j", f"{array}_1,{ok}"), [f"{array}_1", str(ok)])
        user = self.show(ok)["user"]
        self.assertEqual(len(ids("-u", user)), 5)
        self.assertEqual(ids("-u", "nobody-here"), [])
        self.assertNotIn(str(ok), ids("-S", f"{middle:.3f}"))
        self.assertEqual(ids("-E", f"{middle:.3f}"), [str(ok)])
        self.assertEqual(len(ids("-S", "1h")), 5)
        # sacct's bare list, no width anywhere: its names, not the text on every row.
        lines = self.colo_ok("history", "--format", "JobID,State").stdout.splitlines()
        self.assertEqual(lines[0].split(), ["JobID", "State"])
        self.assertIn([str(bad), "FAILED"], [l.split() for l in lines[1:]])
        self.assertNotIn("JobID,State", "\n".join(lines))
        r = self.colo("history", "--format", "JobID,Bogus")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown field 'Bogus'", r.stderr)
        r = self.colo("history", "--format", "hello")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(self.colo("history", "-s", "nope").returncode, 2)
        self.assertEqual(self.colo("history", "-S", "yesterday-ish").returncode, 2)

    def test_queue_takes_squeues_user_filter(self):
        """colo queue -u USER, as squeue -u: that user's jobs only."""
        job = self.submit("--hold", "--", "true")
        user = self.show(job)["user"]
        ids = self.colo_ok("queue", "-u", user, "--noheader", "--format", "%i").stdout.split()
        self.assertEqual(ids, [str(job)])
        self.assertEqual(self.colo_ok("queue", "-u", "nobody-here", "--noheader").stdout, "")
        self.colo_ok("cancel", job)

    # --- colo show, colo eff ---

    def test_show_has_scontrols_fields_and_keeps_the_plan(self):
        """TimeLimit, StartTime, ArrayJobId and ArrayTaskId; after the job ended, Need is the
        plan its last attempt ran with."""
        array = self.submit("--array", "0-1", "--mem", "3GiB", "-t", "1:00:00", "--", "true")
        task = array + 1
        self.finished(task)
        show = self.colo_ok("show", f"{array}_1").stdout
        self.assertIn(f"JobId={task} ArrayJobId={array} ArrayTaskId=1 ", show)
        self.assertIn("State=COMPLETED", show)
        self.assertIn("TimeLimit=1:00:00 ", show)
        detail = self.show(task)
        started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(detail["started"]))
        self.assertIn(f"StartTime={started} ", show)
        self.assertIn("Need=3.0 GiB (planned for attempt 1)", show)

    def test_eff_judges_a_job_and_an_array(self):
        """colo eff N: planned against peak GPU memory, its GPUs' SM activity and energy while
        it ran, GPU-hours and attempts, and a verdict with the --mem to ask next time; for an
        array's id, every task."""
        job = self.submit("--mem", "24GiB", "--name", "big-ask", "--", "compute",
                          self.gpu_dir, str(int(7.9 * GIB)), "0.6", "1.5")
        self.assertEqual(self.finished(job)["state"], "succeeded")
        wait_until(lambda: self.colo_json("eff", job)["smact_mean"] is not None, 10,
                   "the job's samples to be recorded")
        eff = self.colo_json("eff", job)
        self.assertEqual((eff["job"], eff["tasks"], eff["attempts"]), (str(job), 1, 1))
        self.assertEqual(eff["planned"], 24 * GIB)
        self.assertEqual(eff["peak"], int(7.9 * GIB))
        self.assertTrue(0.3 < eff["smact_mean"] <= 0.6, eff)  # its first samples may be idle
        self.assertAlmostEqual(eff["smact_p95"], 0.6, places=2)
        self.assertGreater(eff["energy_wh"], 0)
        self.assertGreater(eff["gpu_hours"], 1 / 3600)
        self.assertEqual(eff["verdict"], "asked 24 GiB, used 7.9: next time --mem 9GiB")
        text = self.colo_ok("eff", job).stdout
        self.assertIn("GPU memory peak:      7.9 GiB per GPU (33% of planned)", text)
        self.assertIn("Verdict:              asked 24 GiB, used 7.9: next time --mem 9GiB", text)
        self.assertRegex(text, r"SM activity: +mean \d+%, p95 60%")

        array = self.submit("--array", "0-2", "--mem", "4GiB", "--", "compute", self.gpu_dir,
                            str(3 * GIB), "0.3", "0.5")
        for task in range(array, array + 3):
            self.finished(task)
        eff = self.colo_json("eff", array)
        self.assertEqual((eff["job"], eff["tasks"], eff["states"]),
                         (f"{array} (array, 3 tasks)", 3, ["3 COMPLETED"]))
        self.assertEqual(eff["verdict"], "asked 4 GiB, used 3 (75%): the plan fits")
        self.assertEqual(self.colo_json("eff", f"{array}_2")["job"], f"{array}_2")
        retried = self.submit("--mem", "1GiB", "--share", "plain", "--", "oom-once")
        self.finished(retried)
        eff = self.colo_json("eff", retried)
        self.assertEqual((eff["attempts"], eff["out_of_memory"]), (2, 1))
        self.assertEqual(self.colo("eff", 9999).returncode, 1)

    # --- Array tasks ---

    def test_array_tasks_have_one_name_everywhere(self):
        """A task of an array is ARRAY_TASK (42_1) in colo queue, gpus and explain, and in the
        replies of cancel, hold, release and wait, whether named by its own id or as a task."""
        release = os.path.join(self.work, "release")
        array = self.submit("--array", "0-3", "--share", "exclusive", "--", "wait-for", release)
        self.wait_state(array, "running")
        self.wait_state(array + 1, "running")
        task1, task2, task3 = f"{array}_1", f"{array}_2", f"{array}_3"
        queue = self.colo_ok("queue", "--noheader", "--format", "%i %t").stdout.split("\n")
        self.assertIn(f"{task1} R", queue)
        self.assertIn(f"{task3} PD", queue)
        gpus = self.colo_ok("gpus").stdout
        self.assertIn(f" {array}_0(", gpus)
        self.assertIn(f" {task1}(", gpus)
        self.assertTrue(self.colo_ok("explain", array + 3).stdout.startswith(
            f"job {task3} (PENDING): "))
        self.assertEqual(self.colo_ok("hold", array + 2).stdout, f"job {task2}: held\n")
        self.assertEqual(self.colo_ok("release", task2).stdout, f"job {task2}: queued\n")
        r = self.colo("hold", array + 1)
        self.assertEqual(r.stderr, f"colo: job {task1} is running; only a waiting job can be "
                                   "held\n")
        self.assertEqual(self.colo_ok("cancel", array + 3).stdout, f"job {task3}: cancelled\n")
        self.write(release, "")
        out = self.colo("wait", array).stdout
        for task, state in ((f"{array}_0", "succeeded"), (task1, "succeeded"),
                            (task2, "succeeded"), (task3, "cancelled")):
            self.assertIn(f"job {task}: {state}", out)


if __name__ == "__main__":
    harness.main()
