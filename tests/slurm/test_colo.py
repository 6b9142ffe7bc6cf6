"""colo as the node layer of a real Slurm cluster: the SPANK plugin (build/lib/colo_spank.so) in
sbatch and on every node, job_submit.lua, a colod with 2 fake GPUs per node.

Each job is a shell script that records what colo gave it (GPU, planned memory) and when it ran,
so the tests check placements from the jobs' own side."""

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
echo "start $(date +%s.%N) node=$(hostname) gpus=$CUDA_VISIBLE_DEVICES planned=$COLO_GPU_MEMORY restart=${{SLURM_RESTART_COUNT:-0}}"
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

    def test_a_colo_job_runs_on_the_gpu_colod_chose_with_its_planned_memory(self):
        job = self.sbatch("colo-alice", job_text(10 * GIB, 1), ["--colo-mem=12GiB"])
        self.assert_completed(job)
        runs = self.runs_of(job)
        self.assertEqual(len(runs), 1, self.output_of(job))
        node, gpus, planned, _, end = runs[0]
        self.assertTrue(gpus.startswith("fake-") or gpus.startswith("GPU-"), gpus)
        self.assertEqual(planned, 12 * GIB)
        self.assertIsNotNone(end)
        info = self.job_info(job)
        self.assertIn("gpumem:12288", info.get("TresPerNode", ""), info)

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
        mib = -(-upper // (1 << 20))
        self.assertIn(f"gpumem:{mib}", self.job_info(job).get("TresPerNode", ""))
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
        # More memory than any node has: refused by job_submit.lua, with a message.
        result = self.sbatch_result("colo-alice", job_text(GIB, 0), ["--colo-mem=900GiB"])
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("colo", result.stderr)

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

    def test_a_job_no_gpu_of_its_node_can_take_is_requeued_elsewhere_with_a_reason(self):
        # Two jobs fill 62 GiB of each GPU of n1: 36 GiB of Slurm's gpumem stay free there, but
        # no GPU has 30 GiB. A 30 GiB job that Slurm sends to n1 waits colod's wait_limit, then
        # goes back to Slurm with n1 excluded and runs on another node.
        blockers = [self.sbatch("colo-bob", job_text(60 * GIB, 25),
                                ["--colo-mem=60GiB", "--colo-share=plain", "-w", "n1"])
                    for _ in range(2)]
        for job in blockers:
            self.wait_for(job, "RUNNING")
        job = self.sbatch("colo-alice", job_text(30 * GIB, 1),
                          ["--colo-mem=30GiB", "--colo-share=plain", "--open-mode=append"])
        try:
            info = self.assert_completed(job, deadline=90)
        finally:
            for blocker in blockers:
                self.slurm("scancel", blocker, check=False)
        self.assertEqual(info.get("ExcNodeList"), "n1", info)
        self.assertGreaterEqual(int(info["Restarts"]), 1, info)
        runs = self.runs_of(job)
        self.assertEqual(len(runs), 1, self.output_of(job))
        self.assertNotEqual(runs[0][0], "n1")
        self.assertIn("goes back to Slurm's queue", self.output_of(job))
        self.assertIn(f"Slurm job {job} requeued: no GPU of this node could take it",
                      self.colod_log("n1"))
        # What n1 gave back left its queue: once the blockers are gone, n1's two GPUs each take
        # a job at once (nothing keeps one for a job that is no longer there).
        for blocker in blockers:
            self.wait_finished(blocker)
        pair = [self.sbatch("colo-alice", job_text(70 * GIB, 6),
                            ["--colo-mem=70GiB", "--colo-share=plain", "-w", "n1"])
                for _ in range(2)]
        for each in pair:
            self.assert_completed(each)
        (first,), (second,) = (self.runs_of(each) for each in pair)
        self.assertNotEqual(first[1], second[1], "each on a GPU of its own")
        self.assertLess(max(first[3], second[3]), min(first[4], second[4]),
                        f"they ran one after the other: {first} {second}")

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

    def test_a_job_on_a_node_whose_colod_is_down_fails_at_once_with_a_message(self):
        self.cluster.script("kill-colod", self.cluster.root, "n3")
        try:
            start = time.monotonic()
            job = self.sbatch("colo-alice", job_text(GIB, 1), ["--colo-mem=1GiB", "-w", "n3"])
            info = self.wait_finished(job, deadline=60)
            self.assertLess(time.monotonic() - start, 45)
            self.assertEqual(info["JobState"], "FAILED", info)
            self.assertIn("colod", self.output_of(job, info))
            self.assertIn("unreachable", self.output_of(job, info))
            # The node stays in service: colo never drains it.
            state = self.slurm("sinfo", "-h", "-n", "n3", "-o", "%t").stdout.strip()
            self.assertIn(state, ("idle", "mix", "alloc"), state)
        finally:
            self.cluster.script("restart-colod", self.cluster.root, "n3")

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


if __name__ == "__main__":
    harness.main()
