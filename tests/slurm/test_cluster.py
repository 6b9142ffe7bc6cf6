#!/usr/bin/env python3
"""The 3-node test cluster itself and packaging/slurm/job_submit.lua, without colo's SPANK
plugin: plain, multi-node and GPU jobs, two users at once, GPU memory booked per GPU as shards, colod
restarts."""

import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import NODES, SlurmClusterTest  # noqa: E402

GPU_SHARDS = 78  # an 80 GiB GPU less colod's 2 GiB margin, in shards of 1 GiB (cluster.sh)


def tres_entries(tres):
    """'gres:gpu:1,gres:shard:12' -> {'gpu': '1', 'shard': '12'}."""
    entries = {}
    for item in (tres or "").split(","):
        parts = item.split(":")
        if len(parts) >= 2 and parts[0] == "gres":
            entries[parts[1]] = parts[-1]
    return entries


class ClusterTest(SlurmClusterTest):

    def test_plain_job_completes_as_alice(self):
        job = self.sbatch("colo-alice", "hostname\nid -un\n")
        info = self.assert_completed(job)
        self.assertIn(info["NodeList"], NODES)
        self.assertEqual(info["UserId"].split("(")[0], "colo-alice")
        self.assertEqual(self.output_of(job).split(), [info["NodeList"], "colo-alice"])

    def test_job_on_all_three_nodes(self):
        job = self.sbatch("colo-alice", "srun hostname | sort\n", ["-N3"])
        info = self.assert_completed(job)
        self.assertEqual(self.expand_nodes(info["NodeList"]), list(NODES))
        self.assertEqual(self.output_of(job).split(), list(NODES))

    def test_gpu_job_gets_a_gpu(self):
        job = self.sbatch("colo-alice",
                          'echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"\n'
                          'echo "SLURM_JOB_GPUS=$SLURM_JOB_GPUS"\n', ["--gres=gpu:1"])
        self.assert_completed(job)
        out = dict(line.split("=", 1) for line in self.output_of(job).split())
        self.assertIn(out["CUDA_VISIBLE_DEVICES"], ("0", "1"))
        self.assertIn(out["SLURM_JOB_GPUS"], ("0", "1"))

    def test_lua_leaves_whole_gpu_and_shard_jobs_as_asked(self):
        one = self.sbatch("colo-alice", "true\n", ["--gres=gpu:1"])
        two = self.sbatch("colo-bob", "true\n", ["--gpus-per-node=2"])
        shard = self.sbatch("colo-bob", "true\n", ["--gres=shard:12"])
        for job, entries in ((one, {"gpu": "1"}), (two, {"gpu": "2"}), (shard, {"shard": "12"})):
            info = self.assert_completed(job)
            self.assertEqual(tres_entries(info.get("TresPerNode")), entries, info)

    def test_lua_books_an_mps_percentage_as_shards_and_notes_it(self):
        job = self.sbatch("colo-alice", "true\n", ["--gres=mps:50", "--comment=mine"])
        info = self.assert_completed(job)
        self.assertEqual(tres_entries(info.get("TresPerNode")), {"shard": str(GPU_SHARDS // 2)})
        # (parse_record would take "colo:mps" for a key of its own.)
        self.assertIn(" Comment=mine colo:mps=50 ", self.scontrol("show", "job", "-o", job).stdout)

    def test_lua_leaves_cpu_jobs_alone(self):
        job = self.sbatch("colo-alice", "true\n", ["-c2"])
        info = self.assert_completed(job)
        self.assertNotIn("TresPerNode", info)
        self.assertTrue(info["TRES"].startswith("cpu=2,"), info["TRES"])

    def test_lua_refuses_what_no_node_or_gpu_has(self):
        for gres, expected in (("gpu:3", "a node has at most 2"),
                               (f"shard:{GPU_SHARDS + 1}", "more than any GPU has"),
                               ("mps:101", "more than a whole GPU"),
                               ("gpu:1,shard:5", "Invalid generic resource")):
            # (sbatch itself refuses gpu and shard in one request; job_submit.lua would too.)
            result = self.sbatch_result("colo-alice", "true\n", [f"--gres={gres}"])
            self.assertNotEqual(result.returncode, 0, gres)
            self.assertIn(expected, result.stderr, gres)

    def test_lua_refuses_job_wide_gpus(self):
        result = self.sbatch_result("colo-alice", "true\n", ["--gpus=1"])
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--gres=gpu:N", result.stderr)

    def test_shards_are_booked_per_gpu(self):
        # 50 of the 78 shards of every GPU taken: 168 shards stay free on the cluster, 56 on
        # each node, but no GPU has 40, and a job's shards all come from one GPU.
        hold = [self.sbatch("colo-alice", "sleep 300\n", ["--gres=shard:50", "-w", node])
                for node in NODES for _ in range(2)]
        try:
            for job in hold:
                self.wait_for(job, "RUNNING")
            gpus = {(self.job_info(job)["NodeList"], self.gpu_index(job)) for job in hold}
            self.assertEqual(len(gpus), 6, "each on a GPU of its own")
            # (The builtin scheduler starts jobs in order: the one that fits goes first.)
            small = self.sbatch("colo-bob", "true\n", ["--gres=shard:28"])
            self.assert_completed(small)
            big = self.sbatch("colo-bob", "true\n", ["--gres=shard:40"])
            harness.wait_until(lambda: self.job_info(big).get("Reason") == "Resources",
                               harness.JOB_DEADLINE, f"job {big} to wait for Resources")
            self.assertEqual(self.job_info(big)["JobState"], "PENDING")
            self.slurm("scancel", hold[0])
            self.assert_completed(big)
        finally:
            self.slurm("scancel", *hold, check=False)

    def gpu_index(self, job):
        """The GPU index(es) Slurm gave a running job on its node (scontrol show job -d)."""
        detail = self.scontrol("show", "job", "-d", job).stdout
        found = re.search(r"GRES=\S*\(IDX:([0-9,-]+)\)", detail)
        self.assertIsNotNone(found, detail)
        return found.group(1)

    def test_two_users_run_at_once(self):
        shared = os.path.join(self.cluster.root, "work", "both")
        os.makedirs(shared, exist_ok=True)
        os.chmod(shared, 0o1777)
        # Each job waits (at most 60 s) until the other one has started.
        script = ("touch {shared}/$(id -un)\n"
                  "for i in $(seq 600); do\n"
                  "  [ -e {shared}/colo-alice ] && [ -e {shared}/colo-bob ] && exit 0\n"
                  "  sleep 0.1\n"
                  "done\nexit 1\n").format(shared=shared)
        alice = self.sbatch("colo-alice", script)
        bob = self.sbatch("colo-bob", script)
        self.assertEqual(self.assert_completed(alice, 90)["UserId"].split("(")[0], "colo-alice")
        self.assertEqual(self.assert_completed(bob, 90)["UserId"].split("(")[0], "colo-bob")

    def test_squeue_lists_finished_jobs_and_restarts(self):
        job = self.sbatch("colo-alice", "true\n")
        self.assert_completed(job)
        mine = [j for j in self.squeue() if j["id"] == job]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["state"], "COMPLETED")
        self.assertEqual(mine[0]["restarts"], "0")
        self.assertEqual(mine[0]["user"], "colo-alice")

    def test_requeue_runs_a_job_again_at_once(self):
        job = self.sbatch("colo-alice", 'echo "run ${SLURM_RESTART_COUNT:-0}"\nsleep 300\n',
                          ["--open-mode=append"])
        self.wait_for(job, "RUNNING")
        # RUNNING comes a moment before the script does.
        harness.wait_until(lambda: "run 0" in self.output_of(job), 10, "the first run's output")
        start = time.monotonic()
        self.requeue_now(job)
        info = self.wait_for(job, "RUNNING", 15)
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(info["Restarts"], "1")
        harness.wait_until(lambda: "run 1" in self.output_of(job), 10, "the second run's output")
        runs = [line for line in self.output_of(job).splitlines() if line.startswith("run ")]
        self.assertEqual(runs, ["run 0", "run 1"])
        self.slurm("scancel", job)
        self.wait_finished(job)

    def test_requeue_of_a_finished_job(self):
        job = self.sbatch("colo-bob", 'echo "run ${SLURM_RESTART_COUNT:-0}"\nexit 3\n',
                          ["--open-mode=append"])
        self.assertEqual(self.wait_finished(job)["JobState"], "FAILED")
        self.requeue_now(job)
        harness.wait_until(lambda: "run 1" in self.output_of(job), 15, "the second run's output")
        info = self.wait_finished(job)
        self.assertEqual(info["Restarts"], "1")
        # Each requeue leaves a PENDING record in the completion log (sacct -c), then the end.
        records = self.slurm("sacct", "-c", "-n", "-P", "-j", job, "-o", "JobID,State").stdout
        self.assertEqual(records.split(), [f"{job}|FAILED", f"{job}|PENDING", f"{job}|FAILED"])

    def test_colod_restart(self):
        path = os.path.join(harness.COLO_SOCKET_DIR, "n2.sock")

        def hello():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(path)
                s.sendall(json.dumps({"api": 1, "op": "hello"}).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                return json.loads(data)

        self.assertTrue(hello().get("ok"))
        self.cluster.script("kill-colod", self.cluster.root, "n2")
        with self.assertRaises(OSError):
            hello()
        start = time.monotonic()
        self.cluster.script("restart-colod", self.cluster.root, "n2")
        self.assertTrue(hello().get("ok"))
        self.assertLess(time.monotonic() - start, 20)
        status = self.cluster.script("status", self.cluster.root).stdout
        self.assertIn("colod-n2 running", status)


if __name__ == "__main__":
    harness.main()
