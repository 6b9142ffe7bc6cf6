#!/usr/bin/env python3
"""`colo submit TASK.rad` for every CARMA task file in tests/data/carma, through the real binaries.

The tasks' training scripts do not exist here; a fake `conda` (written by the test) stands in for
conda: `conda env list --json` lists its envs/ directory, and `conda run -n ENV CMD...` says which
environment and command it was asked for, then runs the command with the environment's bin/ first
on PATH, where `python` and `python3` only say how they were called.
"""

import json
import os
import shutil

import harness
from test_documented import DocumentedTest

FAKE_CONDA = """#!/bin/sh
fail() { echo "fake conda: $*" >&2; exit 64; }
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$*" = "env list --json" ]; then
  printf '{"envs": ["%s"' "$root"
  for env in "$root"/envs/*; do [ -d "$env" ] && printf ', "%s"' "$env"; done
  printf ']}\\n'
  exit 0
fi
[ "$1" = run ] || fail "only 'conda run' and 'conda env list --json' are known, got: $*"
shift
[ "$1" = --no-capture-output ] || fail "expected --no-capture-output, got: $*"
shift
[ "$1" = -n ] && [ -n "$2" ] || fail "expected -n ENV, got: $*"
name=$2
shift 2
[ $# -gt 0 ] || fail "no command"
[ -d "$root/envs/$name" ] || { echo "EnvironmentLocationNotFound: $name" >&2; exit 1; }
echo "conda env: $name"
echo "conda command: $*"
PATH="$root/envs/$name/bin:$PATH" CONDA_DEFAULT_ENV=$name exec "$@"
"""

# The environment's python: a stand-in for the training script it was asked to run.
ENV_PYTHON = """#!/bin/sh
echo "$(basename "$0") of $CONDA_DEFAULT_ENV: $*"
"""

UNKNOWN_MIB = 40000  # CARMA's "not known"


def task_files():
    """Every vendored task file, relative to tests/data/carma."""
    root = os.path.join(harness.DATA_DIR, "carma")
    found = []
    for directory, _, files in os.walk(root):
        found += [os.path.relpath(os.path.join(directory, f), root)
                  for f in files if f.endswith(".rad")]
    return sorted(found)


def expected_memory(lines):
    """The number colo plans with: the measured peak (line 9), else GPUMemNet's, Horus',
    FakeTensor's (lines 12, 10, 11); None when every one is missing or 40000."""
    for index in (8, 11, 9, 10):
        if index < len(lines) and lines[index].strip():
            mib = float(lines[index])
            if int(mib) != UNKNOWN_MIB:
                return int(mib * (1 << 20) + 0.5)
    return None


class CarmaTaskFiles(DocumentedTest):
    def setUp(self):
        super().setUp()
        conda_root = self.mkdir("home", "conda", user=self.user)
        self.conda_bin = self.mkdir("home", "conda", "bin", user=self.user)
        self.conda = self.write(os.path.join(self.conda_bin, "conda"), FAKE_CONDA, 0o755,
                                self.user)
        self.mkdir("home", "conda", "envs", user=self.user)
        for env in ("tf", "torch"):
            env_bin = self.mkdir("home", "conda", "envs", env, "bin", user=self.user)
            for python in ("python", "python3"):
                self.write(os.path.join(env_bin, python), ENV_PYTHON, 0o755, self.user)
        self.assertTrue(os.path.isdir(conda_root))

    def copy_task(self, relative):
        """The task file, copied into the user's working directory (same relative path)."""
        target = os.path.join(self.work, "carma", relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(os.path.join(harness.DATA_DIR, "carma", relative), target)
        harness.chown_tree(self.work, self.user)
        return target

    def submit_task(self, path):
        return self.colo("submit", "--json", path, path_prefix=self.conda_bin)

    def test_every_task_file_runs(self):
        """`colo submit TASK.rad` of all CARMA task files: each becomes a job named after the
        file, with the file's GPUs and memory number (exclusive when it has none), that runs
        the file's command through `conda run -n ENV` and succeeds."""
        files = task_files()
        self.assertGreaterEqual(len(files), 52, files)
        submitted = {}
        for relative in files:
            path = self.copy_task(relative)
            r = self.submit_task(path)
            self.assertEqual(r.returncode, 0, f"{relative}: {r.stdout}{r.stderr}")
            submitted[relative] = (path, int(json.loads(r.stdout)["job"]))
        exclusive = 0
        for relative, (path, job) in submitted.items():
            with open(path) as f:
                lines = [line.strip() for line in f.read().split("\n")]
            env = lines[1].split()[-1]
            command = lines[2]
            detail = self.assert_succeeded(job)
            self.assertEqual(detail["command"], [self.conda, "run", "--no-capture-output", "-n",
                                                 env, "/bin/sh", "-c", command], relative)
            self.assertEqual(detail["name"], os.path.basename(relative)[:-4], relative)
            self.assertEqual(detail["source"], "rad " + path, relative)
            gpus = int(lines[7]) if len(lines) > 7 and lines[7] else 1
            self.assertEqual(len(detail["gpu_uuids"]), gpus, relative)
            memory = expected_memory(lines)
            self.assertEqual(detail.get("memory"), memory, relative)
            if memory is None:
                exclusive += 1
                self.assertEqual(detail["share"], "exclusive", relative)
                self.assertEqual(detail["attempt_list"][0]["mode"], "exclusive", relative)
            program, *args = command.split()
            self.assertEqual(self.logs(job),
                             f"conda env: {env}\nconda command: /bin/sh -c {command}\n"
                             f"{program} of {env}: {' '.join(args)}\n", relative)
        # CARMA's gpt2_xl.rad files give no memory number at all.
        self.assertGreaterEqual(exclusive, 2)

    def test_unknown_environment_is_refused_at_submit(self):
        """A task file naming an environment conda does not have: exit 1 before anything is
        queued, naming the file, the environment and the ones conda has."""
        path = self.copy_task(os.path.join("workloads", "vgg.rad"))
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("conda activate tf", "conda activate tensorflw"))
        r = self.submit_task(path)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"{path}: conda has no environment 'tensorflw' (conda env list: tf, torch)",
                      harness.error_message(r))
        self.assertEqual(self.colo_json("queue")["jobs"], [])
        self.assertEqual(self.colo_json("history")["jobs"], [])

    def test_conda_that_cannot_list_is_a_clear_error(self):
        """A conda whose `env list --json` fails: the submit says so, with conda's words."""
        path = self.copy_task(os.path.join("workloads", "vgg.rad"))
        self.write(self.conda, "#!/bin/sh\necho 'CondaError: broken install' >&2\nexit 1\n",
                   0o755, self.user)
        r = self.submit_task(path)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("env list --json' exited with status 1 while checking for environment 'tf'",
                      harness.error_message(r))
        self.assertIn("CondaError: broken install", harness.error_message(r))
        self.assertEqual(self.colo_json("queue")["jobs"], [])

    def test_all_memory_lines_unknown_runs_exclusive(self):
        """A task file whose memory lines are all 40000 asks for its GPU alone: share exclusive,
        no memory number, and it runs exclusively."""
        path = self.copy_task(os.path.join("workloads", "dlrm.rad"))
        with open(path) as f:
            lines = f.read().split("\n")
        lines[8:12] = ["40000"] * 4
        with open(path, "w") as f:
            f.write("\n".join(lines))
        job = int(json.loads(self.submit_task(path).stdout)["job"])
        detail = self.assert_succeeded(job)
        self.assertEqual(detail["share"], "exclusive")
        self.assertNotIn("memory", detail)
        self.assertEqual(detail["attempt_list"][0]["mode"], "exclusive")
        # The command line still wins over the file.
        job = int(json.loads(self.colo_ok("submit", "--json", "--share", "mps", "--mem", "2GiB",
                                          path, path_prefix=self.conda_bin).stdout)["job"])
        detail = self.assert_succeeded(job)
        self.assertEqual((detail["share"], detail["memory"]), ("mps", 2 << 30))


class ActivitySource(DocumentedTest):
    """A GPU without GPM or DCGM (a fake one with a nogpm file): `colo gpus` warns that its SMACT
    is NVML's utilization, and /metrics leaves its colo_gpu_sm_active_ratio out instead of reporting
    -1."""

    def setUp(self):
        harness.E2ETest.setUp(self)
        self.user = harness.unprivileged_user()
        self.client_user = self.user
        self.home = self.mkdir("home", user=self.user, mode=0o755)
        self.runtime = self.mkdir("run", user=self.user, mode=0o700)
        self.work = self.mkdir("home", "work", user=self.user)
        self.bin = self.mkdir("home", "bin", user=self.user)
        self.gpu_dir = self.mkdir("fake-gpus", user=self.user)
        self.write(os.path.join(self.gpu_dir, "nogpm-1"), "", user=self.user)
        self.write(os.path.join(self.gpu_dir, "smact-0"), "0.5\n", user=self.user)
        self.port = harness.free_loopback_port()
        self.daemon = self.start_personal(
            extra_args=["--fake-gpu-dir", self.gpu_dir],
            config={"metrics": {"enabled": True, "port": self.port, "max_clients": 2}})

    def test_gpus_warns_and_metrics_leave_unknown_activity_out(self):
        def sampled():
            gpus = self.colo_json("gpus")["gpus"]
            return gpus if all(g.get("activity_source") for g in gpus) else None

        gpus = harness.wait_until(sampled, 10, "a sample of both GPUs")
        self.assertEqual([g["activity_source"] for g in gpus], ["fake", "utilization"])
        self.assertEqual(gpus[0]["smact"], 0.5)
        self.assertNotIn("activity_note", gpus[0])
        self.assertIn("without GPM or DCGM", gpus[1]["activity_note"])
        r = self.colo_ok("gpus")
        self.assertIn("GPU 1's SMACT is NVML's coarse utilization, not SM activity", r.stderr)
        self.assertIn("install DCGM", r.stderr)
        self.assertNotIn("GPU 0's", r.stderr)
        status, body = harness.http_get(self.port, "/metrics")
        self.assertEqual(status, "HTTP/1.1 200 OK")
        smact = [line for line in body.splitlines()
                 if line.startswith("colo_gpu_sm_active_ratio{")]
        self.assertEqual(len(smact), 1, smact)
        self.assertRegex(smact[0], r'^colo_gpu_sm_active_ratio\{gpu="0",UUID="[^"]+",'
                                   r'modelName="[^"]+",Hostname="[^"]*",source="fake"\} 0\.5$')
        self.assertNotRegex(body, r'colo_gpu_sm_occupancy_ratio\{gpu="1"')
        self.assertRegex(body, r'colo_gpu_activity_source\{gpu="1",UUID="[^"]+",modelName="[^"]+",'
                               r'Hostname="[^"]*",source="utilization"\} 1')


class CarmaTraceInTheSimulator(harness.E2ETest):
    def test_relative_script_path_finds_task_files_above_it(self):
        """`colo sim --trace carma:x.sh` from the script's own directory, carma:traces/x.sh
        from the one above, and the absolute path: the task files one directory above the
        script are found each way, and the runs are the same."""
        repo = self.mkdir("repo")
        traces = self.mkdir("repo", "traces")
        for name in ("mytask", "other"):  # no catalogued name: only the file says what it is
            shutil.copy(os.path.join(harness.DATA_DIR, "carma", "resnet50_64.rad"),
                        os.path.join(repo, name + ".rad"))
        script = self.write(os.path.join(traces, "x.sh"),
                            "cd experiments\npython3 submit.py --task mytask.rad\nsleep 30\n"
                            "python3 submit.py --task other.rad\n")
        runs = []
        for trace, cwd in (("carma:x.sh", traces), ("carma:traces/x.sh", repo),
                           ("carma:" + script, self.tmp)):
            with self.subTest(trace=trace):
                r = self.colo("sim", "--trace", trace, "--policy", "magm", "--estimator",
                              "rad:horus", "--json", "--with-jobs", cwd=cwd)
                self.assertEqual(r.returncode, 0, r.stderr)
                [run] = json.loads(r.stdout)["runs"]
                self.assertEqual(sorted(j["name"] for j in run["job_results"]),
                                 ["mytask", "other"])
                runs.append(run)
        self.assertEqual(len({json.dumps(run, sort_keys=True) for run in runs}), 1)

if __name__ == "__main__":
    harness.main()
