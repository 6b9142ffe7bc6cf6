"""colo as the node layer of a real Slurm cluster: the SPANK plugin (build/lib/colo_spank.so) in
sbatch and on every node, job_submit.lua, a colod with 2 fake 80 GiB GPUs per node, GPU memory
booked in Slurm per GPU (shards of 1 GiB).

Each job is a shell script that records what colo gave it (GPU, planned memory), which GPU Slurm
booked for it and when it ran, so the tests check placements from the jobs' own side."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

# Under ctest, COLO_SPANK_PLUGIN names the build's plugin, or is empty where none is built (a
# sanitizer build): then this file is skipped.
if "COLO_SPANK_PLUGIN" in os.environ:
    PLUGIN = os.environ["COLO_SPANK_PLUGIN"] and os.path.abspath(os.environ["COLO_SPANK_PLUGIN"])
else:
    PLUGIN = os.path.join(harness.SOURCE_DIR, "build", "lib", "colo_spank.so")
GIB = 1 << 30
GPU_BYTES = 80 * GIB

# A job that needs NEED bytes of GPU memory: it "runs out of memory" (as PyTorch would say) when
# colo planned less for it, else holds its GPU for SECONDS.
JOB = """#!/bin/sh
echo "start $(date +%s.%N) node=$(hostname) gpus=$CUDA_VISIBLE_DEVICES planned=$COLO_GPU_MEMORY restart=${{SLURM_RESTART_COUNT:-0}} slurm=$(scontrol show job -d $SLURM_JOB_ID | sed -n 's/.*(IDX:\\([0-9,-]*\\)).*/\\1/p' | head -1)"
if [ -n "$COLO_GPU_MEMORY" ] && [ "$COLO_GPU_MEMORY" -lt {need} ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2
  exit 1
fi
sleep {seconds}
echo "end $(date +%s.%N)"
"""


def job_text(need, seconds, before=0):
    """A job needing `need` bytes that holds its GPU `seconds`; it checks its memory after
    `before` seconds (a crash that comes a while into the run)."""
    text = JOB.format(need=need, seconds=seconds)
    if before:
        text = text.replace("\nif [", f"\nsleep {before}\nif [", 1)
    return text


COLO = os.path.join(harness.BIN_DIR, "colo")


def fake_gpu(index):
    """The UUID of colod's fake GPU whose device file is nvidiaINDEX, which is Slurm's GPU INDEX
    (cluster.sh lists a node's GPUs in gres.conf in that order)."""
    return f"GPU-fake-{int(index):04d}"


class ColoUnderSlurmTest(harness.SlurmClusterTest):
    @classmethod
    def setUpClass(cls):
        if not PLUGIN or not os.path.exists(PLUGIN):
            harness.skip_file(f"the plugin is not built ({PLUGIN})")
        os.environ["COLO_SPANK"] = PLUGIN
        super().setUpClass()

    def runs_of(self, job_id):
        """[(node, gpus, planned, start, end)] of every run in the job's output."""
        text = self.output_of(job_id)
        runs = []
        for line in text.splitlines():
            if line.startswith("start "):
                fields = dict(f.split("=", 1) for f in line.split()[2:])
                runs.append([fields["node"], fields["gpus"], int(fields["planned"] or 0),
                             float(line.split()[1]), None])
            elif line.startswith("end ") and runs:
                runs[-1][4] = float(line.split()[1])
        return runs

    def colo_jobs(self, node, *args):
        """`colo queue --json` (or another listing) against node's colod, as root."""
        result = subprocess.run([COLO, "--socket", f"/run/colo-slurm/{node}.sock", *args,
                                 "--json"], capture_output=True, text=True, timeout=30,
                                stdin=subprocess.DEVNULL)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)["jobs"]

    def running_here_and_in_slurm(self):
        """({node: Slurm ids colod runs}, {node: Slurm ids squeue says run there})."""
        colo = {n: sorted(j["slurm_job"] for j in self.colo_jobs(n, "queue")
                          if j["state"] == "running" and "slurm_job" in j)
                for n in harness.NODES}
        slurm = {n: [] for n in harness.NODES}
        for j in self.squeue():
            if j["state"] == "RUNNING" and j["nodes"] in slurm:
                slurm[j["nodes"]].append(j["id"])
        return colo, {n: sorted(ids) for n, ids in slurm.items()}

    def tearDown(self):
        # Whatever a test did, no node's colod keeps (running or queued) a Slurm job that Slurm
        # does not run there (the next test would find its GPUs taken or its queue blocked).
        last = {}

        def agree():
            _, slurm = self.running_here_and_in_slurm()
            held = {n: sorted(j["slurm_job"] for j in self.colo_jobs(n, "queue")
                              if "slurm_job" in j) for n in harness.NODES}
            last.update(colod=held, squeue=slurm)
            return all(set(held[n]) <= set(slurm[n]) for n in harness.NODES)

        try:
            harness.wait_until(agree, 30, "every colod to let go of the jobs Slurm has ended")
        except AssertionError as e:
            raise AssertionError(f"{e}: {last}") from None
        super().tearDown()

    def colod_log(self, node):
        with open(os.path.join(self.cluster.root, "colo", node, "colod.log"),
                  errors="replace") as f:
            return f.read()

    def test_a_colo_job_runs_on_the_gpu_slurm_booked_with_its_planned_memory(self):
        # The job also tries each of its node's GPU device files: with ConstrainDevices, only its
        # own opens (there is no driver behind it: "No such device"); another is denied.
        probe = ('for d in "$SLURM_SUBMIT_DIR/../../dev/$(hostname)"/nvidia*; do\n'
                 '  if (: <"$d") 2>&1 | grep -q "not permitted"; then echo "denied ${d##*/}"\n'
                 '  else echo "allowed ${d##*/}"; fi\n'
                 'done\n')
        job = self.sbatch("colo-alice", job_text(10 * GIB, 1) + probe, ["--colo-mem=12GiB"])
        self.assert_completed(job)
        runs = self.runs_of(job)
        self.assertEqual(len(runs), 1, self.output_of(job))
        node, gpus, planned, _, end = runs[0]
        self.assertEqual(planned, 12 * GIB)
        self.assertIsNotNone(end)
        info = self.job_info(job)
        self.assertEqual(info.get("TresPerNode"), "gres:shard:12", info)
        # The GPU Slurm recorded is the one the job ran on.
        slurm_gpu = self.output_of(job).split("slurm=")[1].split()[0]
        self.assertEqual(gpus, fake_gpu(slurm_gpu), self.output_of(job))
        with open(os.path.join(self.cluster.root, "isolation")) as f:
            isolation = f.read().strip()
        if isolation == "cgroup":
            allowed = [line.split()[1] for line in self.output_of(job).splitlines()
                       if line.startswith("allowed ")]
            self.assertEqual(allowed, [f"nvidia{slurm_gpu}"], self.output_of(job))

    def test_an_estimate_file_becomes_the_jobs_memory_request(self):
        # The model summary is the user's file, read by `colo estimate` as the user at
        # submission; the need it gives is what Slurm's gpumem and colod's plan use.
        summary = os.path.join(self.workdir("colo-alice"), "gpt2.json")
        with open(os.path.join(harness.SOURCE_DIR, "tests", "data", "estimate",
                               "hf-gpt2-b4-adam.json")) as src, open(summary, "w") as dst:
            dst.write(src.read())
        os.chown(summary, *self.uid_gid("colo-alice"))
        estimate = json.loads(self.slurm(COLO, "estimate", "--json", "--batch", "4", summary,
                                         user="colo-alice").stdout)
        upper = next(e["upper"] for e in estimate["estimates"]
                     if e["estimator"] == estimate["best"])
        job = self.sbatch("colo-alice", job_text(GIB, 1),
                          ["--colo-estimate-from=gpt2.json", "--colo-batch=4"])
        self.assert_completed(job)
        runs = self.runs_of(job)
        self.assertEqual(runs[0][2], upper)
        self.assertEqual(self.job_info(job).get("TresPerNode"), f"gres:shard:{-(-upper // GIB)}")
        # A summary the user cannot give is refused at submission, with the reason.
        result = self.sbatch_result("colo-alice", job_text(GIB, 1),
                                    ["--colo-estimate-from=/nonexistent/model.json"])
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("/nonexistent/model.json", result.stderr)

    def test_the_steps_of_a_job_are_one_tenant_on_its_gpu(self):
        script = (job_text(2 * GIB, 0) +
                  'srun --ntasks=1 sh -c \'echo "step gpus=$CUDA_VISIBLE_DEVICES '
                  'planned=$COLO_GPU_MEMORY"\'\n')
        job = self.sbatch("colo-bob", script, ["--colo-mem=2GiB", "--colo-share=plain"])
        self.assert_completed(job)
        text = self.output_of(job)
        _, gpus, planned, _, _ = self.runs_of(job)[0]
        self.assertIn(f"step gpus={gpus} planned={planned}", text)
        node = self.node_of(job)
        tenants = [j for j in self.colo_jobs(node, "history", "--all")
                   if j.get("slurm_job") == job]
        self.assertEqual(len(tenants), 1, tenants)
        self.assertEqual(tenants[0]["state"], "succeeded", tenants)
        self.assertEqual(tenants[0]["user"], "colo-bob")

    def test_srun_alone_takes_colo_options_too(self):
        result = self.slurm("srun", "--colo-mem=3GiB", "--colo-share=mps", "sh", "-c",
                            'echo "gpus=$CUDA_VISIBLE_DEVICES planned=$COLO_GPU_MEMORY"',
                            user="colo-alice", cwd=self.workdir("colo-alice"))
        self.assertIn(f"planned={3 * GIB}", result.stdout)
        self.assertIn("gpus=GPU-", result.stdout)

    def uid_gid(self, user):
        import pwd
        pw = pwd.getpwnam(user)
        return pw.pw_uid, pw.pw_gid

    def test_bad_option_values_are_refused_at_submission(self):
        for option, expected in (("--colo-mem=lots", "--colo-mem=lots"),
                                 ("--colo-mem=-5GiB", "--colo-mem=-5GiB"),
                                 ("--colo-mem=0", "more than 0"),
                                 ("--colo-mem=2000TiB", "at most"),
                                 ("--colo-share=sometimes", "mps, plain or exclusive"),
                                 ("--colo-gpus=0", "--colo-gpus")):
            result = self.sbatch_result("colo-alice", job_text(GIB, 0), [option])
            self.assertNotEqual(result.returncode, 0, option)
            self.assertIn(expected, result.stderr, option)
        # More memory than any GPU takes (80 GiB less colod's 2 GiB margin): refused by
        # job_submit.lua, with a message; a batch size without a model to estimate is refused.
        for option, expected in (("--colo-mem=900GiB", "more than any GPU here takes"),
                                 ("--colo-mem=79GiB", "the largest takes 78 GiB"),
                                 ("--colo-batch=4", "--colo-estimate-from")):
            result = self.sbatch_result("colo-alice", job_text(GIB, 0), [option])
            self.assertNotEqual(result.returncode, 0, option)
            self.assertIn(expected, result.stderr, option)
        result = self.sbatch_result("colo-alice", job_text(GIB, 0), ["--colo-mem=78GiB"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.slurm("scancel", result.stdout.strip())

    def test_an_out_of_memory_crash_is_requeued_needing_more_and_completes(self):
        # Every run's lines in one file: Slurm truncates the output at each run otherwise.
        job = self.sbatch("colo-bob", job_text(28 * GIB, 1),
                          ["--colo-mem=20GiB", "--open-mode=append"])
        self.assert_completed(job, deadline=90)
        runs = self.runs_of(job)
        self.assertGreaterEqual(len(runs), 2, self.output_of(job))
        self.assertEqual(runs[0][2], 20 * GIB)
        self.assertGreaterEqual(runs[-1][2], 28 * GIB)
        info = self.job_info(job)
        self.assertGreaterEqual(int(info["Restarts"]), 1)
        self.assertIn("colo:need=", info.get("AdminComment", ""))
        listed = [j for j in self.squeue() if j["id"] == job]
        self.assertEqual(len(listed), 1, listed)
        self.assertEqual(int(listed[0]["restarts"]), len(runs) - 1, listed)

    def test_a_job_that_keeps_running_out_of_memory_fails_at_the_retry_cap_and_says_why(self):
        # It needs more than any GPU has: each run crashes out of memory and goes back to Slurm
        # needing more, on whichever node Slurm picks; the crash after the cap's last retry (3,
        # colod's default, counted over every node through the job's AdminComment) ends it. Its
        # output says colo gave up, and why.
        job = self.sbatch("colo-alice", job_text(200 * GIB, 0),
                          ["--colo-mem=20GiB", "--open-mode=append"])
        info = self.wait_finished(job, deadline=180)
        self.assertEqual(info["JobState"], "FAILED", info)
        self.assertEqual(info["Restarts"], "3", info)
        self.assertIn("colo:need=", info.get("AdminComment", ""))
        self.assertIn("ooms=3", info.get("AdminComment", ""))
        planned = [run[2] for run in self.runs_of(job)]
        self.assertEqual(len(planned), 4, self.output_of(job, info))
        self.assertEqual(planned[0], 20 * GIB)
        self.assertEqual(planned, sorted(set(planned)), "each run planned with more memory")
        # colod writes the last word into the job's output as its user, once it judged the end.
        harness.wait_until(lambda: "colo gave up" in self.output_of(job, info), 30,
                           f"job {job}'s output to say colo gave up")
        text = self.output_of(job, info)
        self.assertIn(f"colo: Slurm job {job} failed: colo gave up and does not requeue it again: "
                      "out of memory 4 times (retry cap 3)", text)
        self.assertIn("Ask for more GPU memory (--colo-mem)", text)
        self.assertEqual(text.count("ran out of GPU memory on"), 3, text)

    def test_forty_jobs_of_two_users_share_gpus_and_never_overcommit_one(self):
        jobs = []
        for i in range(40):
            user = "colo-alice" if i % 2 else "colo-bob"
            need = (6 + (i * 7) % 30) * GIB
            jobs.append((self.sbatch(user, job_text(need, 3),
                                     [f"--colo-mem={need // GIB}GiB", "--colo-share=plain"]),
                         need))
        # While they run, each node's colod runs exactly the jobs squeue says run there (two
        # listings taken one after the other: a job may start or end between them, so they
        # must agree at least once while something runs).
        matched = 0
        for _ in range(60):
            colo, slurm = self.running_here_and_in_slurm()
            if any(slurm.values()) and colo == slurm:
                matched += 1
                if matched >= 3:
                    break
            time.sleep(0.2)
        self.assertGreaterEqual(matched, 3, f"colod: {colo}, squeue: {slurm}")
        for job, _ in jobs:
            self.assert_completed(job, deadline=240)
        intervals = []  # (node, gpu, planned, start, end)
        for job, need in jobs:
            for node, gpus, planned, start, end in self.runs_of(job):
                if end is not None:
                    intervals.append((node, gpus, planned, start, end))
        self.assertEqual(len(intervals), 40)
        most_at_once = 0
        for node, gpu, _, start, _ in intervals:
            together = [i for i in intervals if i[0] == node and i[1] == gpu and
                        i[3] <= start < i[4]]
            self.assertLessEqual(sum(i[2] for i in together), GPU_BYTES,
                                 f"{node} {gpu} overcommitted at {start}: {together}")
        for _, _, _, start, _ in intervals:
            most_at_once = max(most_at_once, sum(1 for i in intervals if i[3] <= start < i[4]))
        self.assertGreater(most_at_once, 6, "more jobs ran at once than there are GPUs")
        # Slurm booked each one's memory on its GPU: none sat RUNNING in Slurm while it waited
        # in colod for memory (colod's own time from the step's ask to the start is milliseconds;
        # a wait for memory would last until another job on the GPU ended).
        for job, _ in jobs:
            self.assertLess(self.colod_wait(job), 1.0, f"job {job} waited in colod")


    def test_a_requeued_job_runs_needing_more_on_another_node(self):
        # The first run crashes out of memory two seconds in; its node is drained meanwhile,
        # so the next run is another node's, whose colod learns the raised need from Slurm.
        job = self.sbatch("colo-alice", job_text(22 * GIB, 1, before=2),
                          ["--colo-mem=20GiB", "--open-mode=append"])
        info = self.wait_for(job, "RUNNING")
        first = info["NodeList"]
        self.scontrol("update", f"NodeName={first}", "State=DRAIN", "Reason=colo-test")
        try:
            self.assert_completed(job, deadline=90)
        finally:
            self.scontrol("update", f"NodeName={first}", "State=RESUME")
        runs = self.runs_of(job)
        self.assertEqual(len(runs), 2, self.output_of(job))
        self.assertEqual(runs[0][0], first)
        self.assertNotEqual(runs[1][0], first)
        self.assertEqual(runs[0][2], 20 * GIB)
        # 20 GiB raised by one OOM crash below its limit (its message says only what it tried
        # to allocate): plan x 1.1 + 512 MiB (core/recovery.h).
        self.assertEqual(runs[1][2], 22 * GIB + GIB // 2)
        self.assertIn("colo:need=", self.job_info(job).get("AdminComment", ""))

    def test_a_whole_gpu_job_is_never_joined_by_a_colo_job(self):
        # n3: a Slurm job with one whole GPU and no colo options, then colo jobs for the same
        # node that would fit on that GPU's memory.
        whole = self.sbatch("colo-bob", 'echo "start $(date +%s.%N) gpus=$CUDA_VISIBLE_DEVICES"\n'
                            'sleep 6\necho "end $(date +%s.%N)"\n',
                            ["--gres=gpu:1", "-w", "n3"])
        self.wait_for(whole, "RUNNING")
        colo_jobs = [self.sbatch("colo-alice", job_text(4 * GIB, 2),
                                 ["--colo-mem=4GiB", "--colo-share=plain", "-w", "n3"])
                     for _ in range(4)]
        self.assert_completed(whole)
        for job in colo_jobs:
            self.assert_completed(job)
        start_line = self.output_of(whole).splitlines()[0]
        whole_gpu = start_line.split("gpus=")[1].strip()
        whole_start = float(start_line.split()[1])
        whole_end = float(self.output_of(whole).splitlines()[-1].split()[1])
        self.assertTrue(whole_gpu.startswith("GPU-"), start_line)
        for job in colo_jobs:
            for _, gpus, _, start, end in self.runs_of(job):
                overlaps = start < whole_end and (end or start) > whole_start
                self.assertFalse(overlaps and gpus == whole_gpu,
                                 f"colo job {job} ran on the whole-GPU job's {gpus}")

    def test_a_fragmented_node_is_passed_over_for_a_job_no_gpu_there_takes(self):
        # Two 50 GiB jobs on n1's two 80 GiB GPUs: 56 of n1's 156 shards stay free, but no GPU
        # of n1 has 40 GiB. Slurm books per GPU, so a 40 GiB job goes to another node at once:
        # n1's colod never hears of it and it runs the first time.
        blockers = [self.sbatch("colo-bob", job_text(50 * GIB, 30),
                                ["--colo-mem=50GiB", "-w", "n1"]) for _ in range(2)]
        try:
            for job in blockers:
                harness.wait_until(lambda job=job: self.runs_of(job), harness.JOB_DEADLINE,
                                   f"job {job} to start")
            self.assertNotEqual(self.runs_of(blockers[0])[0][1], self.runs_of(blockers[1])[0][1])
            job = self.sbatch("colo-alice", job_text(40 * GIB, 1), ["--colo-mem=40GiB"])
            info = self.assert_completed(job)
        finally:
            self.slurm("scancel", *blockers, check=False)
        self.assertEqual(info["Restarts"], "0", info)
        runs = self.runs_of(job)
        self.assertEqual(len(runs), 1, self.output_of(job))
        self.assertNotEqual(runs[0][0], "n1")
        self.assertNotIn(job, [j.get("slurm_job") for j in self.colo_jobs("n1", "history", "--all")])
        self.assertLess(self.colod_wait(job), 2.0)

    def colo_as_root(self, node, *args):
        return subprocess.run([COLO, "--socket", f"/run/colo-slurm/{node}.sock", *args],
                              capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL, cwd=self.cluster.root)

    def test_a_job_whose_gpu_is_taken_outside_slurm_goes_back_kept_off_the_node(self):
        # Root's own colod jobs (outside Slurm's booking) take 70 GiB of each of n1's GPUs. A
        # 30 GiB job Slurm sends to n1 waits colod's wait_limit there, then goes back to Slurm's
        # queue with n1 excluded and runs on another node; its output says why.
        outside = []
        for _ in range(2):
            result = self.colo_as_root("n1", "submit", "--mem", "70GiB", "--share", "plain",
                                       "--", "/bin/sleep", "60")
            self.assertEqual(result.returncode, 0, result.stderr)
            outside.append(result.stdout.split()[-1])
        try:
            harness.wait_until(
                lambda: sum(j["state"] == "running" for j in self.colo_jobs("n1", "queue")) == 2,
                harness.JOB_DEADLINE, "root's two jobs to run on n1")
            job = self.sbatch("colo-alice", job_text(30 * GIB, 1),
                              ["--colo-mem=30GiB", "--open-mode=append"])
            info = self.assert_completed(job, deadline=90)
        finally:
            self.colo_as_root("n1", "cancel", *outside)
        runs = self.runs_of(job)
        self.assertEqual(len(runs), 1, self.output_of(job))
        self.assertNotEqual(runs[0][0], "n1")
        if int(info["Restarts"]) >= 1:  # Slurm sent it to n1 first (it picks the first fit)
            self.assertEqual(info.get("ExcNodeList"), "n1", info)
            self.assertIn("goes back to Slurm's queue", self.output_of(job))
            self.assertIn(f"Slurm job {job} requeued: not the GPU(s) Slurm booked for it here "
                          "could take it", self.colod_log("n1"))

    def test_killing_a_nodes_colod_loses_no_job(self):
        jobs = [self.sbatch("colo-alice", job_text(8 * GIB, 6),
                            ["--colo-mem=8GiB", "--colo-share=plain", "-w", "n2"])
                for _ in range(3)]
        for job in jobs:
            self.wait_for(job, "RUNNING")
        harness.wait_until(lambda: len(self.colo_jobs("n2", "queue")) >= 3, 20,
                           "n2's colod to run the three jobs")
        self.cluster.script("restart-colod", self.cluster.root, "n2")
        # The restarted colod re-adopts them: its queue still lists the three Slurm jobs.
        listed = {j.get("slurm_job") for j in self.colo_jobs("n2", "queue")}
        self.assertTrue(set(jobs) <= listed, listed)
        late = self.sbatch("colo-bob", job_text(8 * GIB, 1),
                           ["--colo-mem=8GiB", "--colo-share=plain", "-w", "n2"])
        for job in jobs + [late]:
            self.assert_completed(job)
            self.assertEqual(len(self.runs_of(job)), 1, self.output_of(job))

    def node_state(self, node):
        record = harness.parse_record(self.scontrol("show", "node", "-o", node).stdout.strip())
        return record.get("State", ""), record.get("Reason", "")

    def test_a_job_on_a_node_whose_colod_is_down_is_requeued_and_the_node_drained_until_back(self):
        self.cluster.script("kill-colod", self.cluster.root, "n3")
        try:
            job = self.sbatch("colo-alice", job_text(GIB, 1),
                              ["--colo-mem=1GiB", "-w", "n3", "--open-mode=append"])
            harness.wait_until(lambda: "DRAIN" in self.node_state("n3")[0], 60,
                               "n3 to be drained")
            harness.wait_until(lambda: int(self.job_info(job).get("Restarts", 0)) >= 1, 60,
                               f"job {job} to be requeued")
            self.assertNotIn(self.job_info(job)["JobState"], harness.FINISHED)
            # Drained by the job's step or by the health check, whichever came first.
            self.assertTrue(self.node_state("n3")[1].startswith("colo: colod "),
                            self.node_state("n3"))
        finally:
            self.cluster.script("start-colod", self.cluster.root, "n3")
        # colod back: it resumes the node, where the job runs.
        info = self.assert_completed(job, deadline=90)
        self.assertEqual(info["NodeList"], "n3")
        self.assertIn("goes back to Slurm's queue", self.output_of(job, info))
        self.assertIn("unreachable", self.output_of(job, info))
        self.assertNotIn("DRAIN", self.node_state("n3")[0])

    def test_colod_stopped_for_30_s_during_a_burst_fails_no_job(self):
        # n2's colod is down for 30 s while jobs keep coming (half of them for n2 by name): the
        # jobs sent there go back to Slurm's queue, n2 is drained (by the first such job or the
        # health check) and resumed when colod is back; no job fails.
        self.cluster.script("kill-colod", self.cluster.root, "n2")
        stopped = time.monotonic()
        jobs, drained = [], False
        try:
            while time.monotonic() - stopped < 30:
                options = ["--colo-mem=4GiB", "--open-mode=append"]
                if len(jobs) % 2 == 0:
                    options += ["-w", "n2"]
                jobs.append(self.sbatch("colo-alice" if len(jobs) % 3 else "colo-bob",
                                        job_text(GIB, 2), options))
                drained = drained or "DRAIN" in self.node_state("n2")[0]
                time.sleep(1.5)
        finally:
            self.cluster.script("start-colod", self.cluster.root, "n2")
        self.assertTrue(drained, "n2 was never drained while its colod was down")
        requeued = 0
        for job in jobs:
            info = self.assert_completed(job, deadline=120)
            requeued += int(info["Restarts"]) > 0
        self.assertGreater(requeued, 0, "no job was sent to n2 while its colod was down")
        harness.wait_until(lambda: "DRAIN" not in self.node_state("n2")[0], 30,
                           "n2 to be resumed")
        print(f"\n{len(jobs)} jobs over a 30 s outage of n2's colod: {requeued} requeued, "
              "0 failed", file=sys.stderr)

    def test_a_drain_of_an_administrators_own_is_left_alone(self):
        self.scontrol("update", "NodeName=n2", "State=DRAIN", "Reason=maintenance")
        try:
            self.cluster.script("restart-colod", self.cluster.root, "n2")
            harness.wait_until(lambda: "Slurm's GPUs" in self.colod_log("n2").split(
                "colod: listening")[-1], 30, "n2's colod to read slurmd's GPUs")
            self.assertTrue(self.node_state("n2")[1].startswith("maintenance"),
                            self.node_state("n2"))
            self.assertIn("DRAIN", self.node_state("n2")[0])
        finally:
            self.scontrol("update", "NodeName=n2", "State=RESUME")

    def test_users_submit_through_slurm_only(self):
        # No side door: a user's colo submit to a Slurm node's colod is refused and names sbatch;
        # root's is taken; what colod shows stays readable to everyone.
        result = self.slurm(COLO, "--socket", "/run/colo-slurm/n2.sock", "submit", "--mem",
                            "1GiB", "--", "/bin/true", user="colo-alice",
                            cwd=self.workdir("colo-alice"), check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("sbatch", result.stderr)
        self.assertIn("slurm.direct_submit", result.stderr)
        for command in (["queue"], ["gpus"], ["history"]):
            shown = self.slurm(COLO, "--socket", "/run/colo-slurm/n2.sock", *command,
                               user="colo-alice", check=False)
            self.assertEqual(shown.returncode, 0, f"{command}: {shown.stderr}")
        root = self.colo_as_root("n2", "submit", "--mem", "1GiB", "--", "/bin/true")
        self.assertEqual(root.returncode, 0, root.stderr)
        job = root.stdout.split()[-1]
        harness.wait_until(lambda: any(str(j["id"]) == job and j["state"] == "succeeded"
                                       for j in self.colo_jobs("n2", "history", "--all")),
                           harness.JOB_DEADLINE, f"root's job {job} to succeed")

    def test_shard_mps_whole_gpu_and_colo_jobs_share_a_node_without_overcommit(self):
        # On n2 at once: plain Slurm shard and mps jobs, whole-GPU jobs and colo jobs. Each kind
        # is booked once, in Slurm's shards of one GPU or whole GPUs; colod runs each on the GPU
        # Slurm booked, none waits on another, no GPU holds more than its memory.
        script = JOB.format(need=0, seconds=4)
        kinds = (["--gres=shard:20"], ["--gres=shard:30"], ["--gres=mps:25"],
                 ["--colo-mem=10GiB"], ["--colo-mem=16GiB", "--colo-share=plain"],
                 ["--gres=gpu:1"], ["--gres=shard:8"], ["--colo-mem=24GiB"])
        jobs = [(self.sbatch("colo-alice" if i % 2 else "colo-bob", script, kind + ["-w", "n2"]),
                 kind) for i, kind in enumerate(kinds)]
        intervals = []
        for job, kind in jobs:
            self.assert_completed(job, deadline=120)
            runs = self.runs_of(job)
            self.assertEqual(len(runs), 1, self.output_of(job))
            _, gpus, planned, start, end = runs[0]
            slurm_gpu = self.output_of(job).split("slurm=")[1].split()[0]
            self.assertEqual(gpus, fake_gpu(slurm_gpu), f"{kind}: {self.output_of(job)}")
            booked = self.job_info(job).get("TresPerNode", "")
            whole = "gpu:" in booked
            memory = GPU_BYTES if whole else int(booked.rsplit(":", 1)[1]) * GIB
            if "--gres=mps:25" in kind:
                # 25% of a GPU's 78 shards; the fake GPUs have no MPS, so colod shares them
                # plainly (on real GPUs: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25).
                self.assertEqual(booked, "gres:shard:20")
                self.assertEqual(planned, memory, kind)
            elif planned:
                self.assertLessEqual(planned, memory, kind)
            intervals.append((gpus, whole, memory, start, end))
        for gpu, whole, _, start, end in intervals:
            together = [i for i in intervals if i[0] == gpu and i[3] < end and start < i[4]]
            self.assertLessEqual(sum(i[2] for i in together), GPU_BYTES - 2 * GIB + (
                2 * GIB if whole else 0), f"{gpu} overbooked: {together}")
            if whole:
                self.assertEqual(len(together), 1, f"a whole GPU shared: {together}")
        # All eight at once need more than n2's two GPUs: the rest waited in Slurm's queue
        # (PENDING), none in colod's (a wait there would last until a job of 4 s ended).
        for job, kind in jobs:
            self.assertLess(self.colod_wait(job), 2.0, kind)

    def colod_wait(self, slurm_job):
        """Seconds from colod's `submitted` event of a Slurm job (the first ask of its run) to
        its `started` event, on the node that ran it."""
        node = self.node_of(slurm_job)
        shown = subprocess.run([COLO, "--socket", f"/run/colo-slurm/{node}.sock", "show",
                                str(self.colod_id(node, slurm_job)), "--json"],
                               capture_output=True, text=True, timeout=30)
        times = {e["kind"]: e["time"] for e in json.loads(shown.stdout)["job"]["events"]}
        return times["started"] - times["submitted"]

    def colod_id(self, node, slurm_job):
        found = [j["id"] for j in self.colo_jobs(node, "history", "--all")
                 if j.get("slurm_job") == slurm_job]
        self.assertEqual(len(found), 1, f"{node}'s colod has Slurm job {slurm_job} {found}")
        return found[0]

    def test_a_step_cannot_take_more_than_slurm_booked(self):
        # A job's owner writes its environment, and Slurm feeds the plugin's options of each
        # step from it: the job below books nothing, but its steps claim two exclusive GPUs.
        forged = ("--export=ALL,_SLURM_SPANK_OPTION_colo_colo_mem=1,"
                  "_SLURM_SPANK_OPTION_colo_colo_share=exclusive,"
                  "_SLURM_SPANK_OPTION_colo_colo_gpus=2")
        job = self.sbatch("colo-alice", 'echo "start gpus=$CUDA_VISIBLE_DEVICES"\nsleep 2\n',
                          [forged, "-w", "n1"])
        info = self.wait_finished(job)
        self.assertEqual(info["JobState"], "FAILED", info)
        self.assertIn("Slurm booked no GPU", self.output_of(job, info))
        self.assertNotIn(job, [j.get("slurm_job") for j in self.colo_jobs("n1", "queue")
                               if j["state"] == "running"])

    def test_only_root_may_speak_for_slurm(self):
        # A user who sends colod the plugin's requests is refused: the uid in them is Slurm's
        # word, which a user cannot give.
        code = ("import json,socket,sys\n"
                "s=socket.socket(socket.AF_UNIX)\n"
                "s.connect('/run/colo-slurm/n1.sock')\n"
                "for op in sys.argv[1:]:\n"
                "    s.sendall((json.dumps(dict(json.loads(op), api=1)) + '\\n').encode())\n"
                "    print(s.makefile().readline().strip())\n")
        ops = [json.dumps({"op": "slurm_attach", "job": 4242, "uid": 0, "memory": GIB}),
               json.dumps({"op": "slurm_end", "job": 4242, "wait_status": 0}),
               json.dumps({"op": "slurm_run", "job": 4242, "restarts": 3})]
        result = self.slurm("python3", "-c", code, *ops, user="colo-alice")
        replies = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual(len(replies), 3, result.stdout)
        for reply in replies:
            self.assertFalse(reply.get("ok", True), reply)
            self.assertEqual(reply.get("code"), "permission_denied", reply)
        self.assertNotIn(4242, [j.get("slurm_job") for j in self.colo_jobs("n1", "queue")])



class HeterogeneousNodesTest(harness.SlurmClusterTest):
    """GPUs of different sizes on one node and across nodes: n1 has an 80 and a 40 GiB GPU, n2
    one of 40 GiB, n3 one of 80 GiB."""

    GPUS = "n1=80,40 n2=40 n3=80"
    SIZES = {("n1", fake_gpu(0)): 80, ("n1", fake_gpu(1)): 40, ("n2", fake_gpu(0)): 40,
             ("n3", fake_gpu(0)): 80}
    runs_of = ColoUnderSlurmTest.runs_of

    @classmethod
    def setUpClass(cls):
        if not PLUGIN or not os.path.exists(PLUGIN):
            harness.skip_file(f"the plugin is not built ({PLUGIN})")
        os.environ["COLO_SPANK"] = PLUGIN
        os.environ["COLO_CLUSTER_GPUS"] = cls.GPUS
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            os.environ.pop("COLO_CLUSTER_GPUS", None)

    def test_each_gpu_books_its_own_memory_and_jobs_go_where_they_fit(self):
        gres = self.slurm("sinfo", "-h", "-N", "-o", "%N %G").stdout
        self.assertIn("n1 gpu:2(S:0-7),shard:116(S:0-7)", gres)
        self.assertIn("n2 gpu:1(S:0-7),shard:38(S:0-7)", gres)
        # A need no GPU of n2 has is refused there at submission, by Slurm itself.
        refused = self.sbatch_result("colo-alice", job_text(GIB, 0),
                                     ["--colo-mem=50GiB", "-w", "n2"])
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("Requested node configuration is not available", refused.stderr)
        # 50 GiB jobs run only on the 80 GiB GPUs; 30 GiB jobs on any GPU.
        jobs = [(self.sbatch("colo-bob" if i % 2 else "colo-alice", job_text(need * GIB, 3),
                             [f"--colo-mem={need}GiB"]), need)
                for i, need in enumerate((50, 50, 50, 30, 30, 30, 30, 30))]
        runs = []
        for job, need in jobs:
            self.assert_completed(job, deadline=120)
            (node, gpu, planned, start, end), = self.runs_of(job)
            self.assertEqual(planned, need * GIB)
            slurm_gpu = self.output_of(job).split("slurm=")[1].split()[0]
            self.assertEqual(gpu, fake_gpu(slurm_gpu))
            self.assertLessEqual(need, self.SIZES[(node, gpu)] - 2, f"{need} GiB on {node} {gpu}")
            runs.append((node, gpu, need, start, end))
        for node, gpu, _, start, _ in runs:
            together = [r for r in runs if r[:2] == (node, gpu) and r[3] <= start < r[4]]
            self.assertLessEqual(sum(r[2] for r in together), self.SIZES[(node, gpu)] - 2,
                                 f"{node} {gpu} overbooked: {together}")
        self.assertTrue(any(self.SIZES[r[:2]] == 40 for r in runs if r[2] == 30),
                        f"no 30 GiB job used a 40 GiB GPU: {runs}")

if __name__ == "__main__":
    harness.main()
