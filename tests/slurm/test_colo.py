"""colo as the node layer of a real Slurm cluster: the SPANK plugin (build/lib/colo_spank.so) in
sbatch and on every node, job_submit.lua, a colod with 2 fake GPUs per node.

Each job is a shell script that records what colo gave it (GPU, planned memory) and when it ran,
so the tests check placements from the jobs' own side."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

PLUGIN = os.path.abspath(os.environ.get("COLO_SPANK_PLUGIN") or
                         os.path.join(harness.SOURCE_DIR, "build", "lib", "colo_spank.so"))
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


def job_text(need, seconds):
    return JOB.format(need=need, seconds=seconds)


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


if __name__ == "__main__":
    harness.main()
