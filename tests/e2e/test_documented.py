#!/usr/bin/env python3
"""Every command and example of the README's "Running jobs" section, through the real binaries.

colod runs as a personal daemon of an unprivileged user (the caller, or colo-alice/nobody when the
tests run as root) with its default paths under a temporary HOME and XDG_RUNTIME_DIR, so `colo`
finds it the way a user's would: without COLO_SOCKET.
"""

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import threading
import time
import unittest

import harness
import lifecycle
from harness import wait_until

WAIT_SCRIPT = """#!/bin/sh
# Prints, waits until the file named by $1 exists (at most 60 s), prints again.
echo "started $COLO_JOB_ID"
echo "on stderr $COLO_JOB_ID" >&2
i=0
while [ ! -e "$1" ]; do
  i=$((i + 1))
  if [ $i -gt 1200 ]; then echo "gave up waiting for $1" >&2; exit 3; fi
  sleep 0.05
done
echo "finished $COLO_JOB_ID"
"""

FAKE_PYTHON = """#!/bin/sh
# A stand-in for python: says how it was called and what colod gave it.
echo "fake python $*"
echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
echo "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE-unset}"
echo "CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY-unset}"
[ -f "$1" ] || { echo "fake python: cannot open $1 in $(pwd)" >&2; exit 2; }
"""

# `conda env list --json` (its envs/ directories) and `conda run --no-capture-output -n ENV CMD
# ARGS...`: CMD runs with the environment's bin/ first on PATH, as conda would run it.
FAKE_CONDA = """#!/bin/sh
fail() { echo "fake conda: $*" >&2; exit 64; }
if [ "$*" = "env list --json" ]; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  printf '{"envs": ["%s"' "$root"
  for env in "$root"/envs/*; do [ -d "$env" ] && printf ', "%s"' "$env"; done
  printf ']}\\n'
  exit 0
fi
[ "$1" = run ] || fail "only 'conda run' is known, got: $*"
shift
[ "$1" = --no-capture-output ] || fail "expected --no-capture-output, got: $*"
shift
[ "$1" = -n ] && [ -n "$2" ] || fail "expected -n ENV, got: $*"
name=$2
shift 2
[ $# -gt 0 ] || fail "no command"
prefix="$(cd "$(dirname "$0")/.." && pwd)/envs/$name"
[ -d "$prefix" ] || { echo "EnvironmentLocationNotFound: $name" >&2; exit 1; }
PATH="$prefix/bin:$PATH" CONDA_DEFAULT_ENV=$name CONDA_PREFIX=$prefix exec "$@"
"""

ENV_PYTHON3 = """#!/bin/sh
echo "python3 of conda env $CONDA_DEFAULT_ENV: $*"
[ -f "$1" ] || { echo "python3: cannot open $1" >&2; exit 2; }
"""

GIB = 1 << 30
TERMINAL = {"succeeded", "failed", "cancelled", "lost", "timeout"}


class DocumentedTest(harness.E2ETest):
    """A personal colod of `self.user` with a short-interval config and default paths."""

    def setUp(self):
        super().setUp()
        self.user = harness.unprivileged_user()
        self.client_user = self.user
        self.home = self.mkdir("home", user=self.user, mode=0o755)
        self.runtime = self.mkdir("run", user=self.user, mode=0o700)
        self.work = self.mkdir("home", "work", user=self.user)
        self.bin = self.mkdir("home", "bin", user=self.user)
        self.write(os.path.join(self.bin, "wait-for"), WAIT_SCRIPT, 0o755, self.user)
        self.write(os.path.join(self.bin, "python"), FAKE_PYTHON, 0o755, self.user)
        self.write(os.path.join(self.work, "train.py"), "print('training')\n", 0o644, self.user)
        self.daemon = self.start_personal()

    def user_env(self):
        """HOME and XDG_RUNTIME_DIR of the personal daemon's owner, without COLO_SOCKET."""
        return {"PATH": harness.SYSTEM_PATH, "HOME": self.home, "XDG_RUNTIME_DIR": self.runtime,
                "LANG": "C.UTF-8", "USER": self.user.name, "LOGNAME": self.user.name}

    def start_personal(self, **kwargs):
        config = kwargs.pop("config", None)
        return self.colod(root=self.home, user=self.user, defaults=True, env=self.user_env(),
                          socket_path=os.path.join(self.runtime, "colo", "colod.sock"),
                          state_dir=os.path.join(self.home, ".local", "state", "colo"),
                          config=config, **kwargs)

    def colod(self, start=True, root=None, **kwargs):
        d = harness.Colod(root or self.tmp, **kwargs)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def client_env(self, user=None, socket_path=None, extra=None, path_prefix=None):
        env = super().client_env(user, None, extra, path_prefix)
        env["HOME"] = self.home
        env["XDG_RUNTIME_DIR"] = self.runtime
        env["PATH"] = (path_prefix + ":" if path_prefix else "") + self.bin + ":" + \
            harness.SYSTEM_PATH
        return env

    def colo(self, *args, **kwargs):
        if kwargs.get("cwd") is None:
            kwargs["cwd"] = self.work
        return super().colo(*args, **kwargs)

    def wait_job(self, *args, **kwargs):
        """Submits `wait-for RELEASE` and waits until it runs; (job, release path)."""
        release = os.path.join(self.work, f"release-{time.monotonic_ns()}")
        job = self.submit(*args, "--", "wait-for", release, **kwargs)
        self.wait_state(job, "running")
        return job, release

    def release(self, path):
        self.write(path, "", user=self.user)

    def logs(self, job, *flags):
        return self.colo_ok("logs", job, *flags).stdout


class PersonalDaemonDefaults(DocumentedTest):
    def setUp(self):
        harness.E2ETest.setUp(self)
        self.user = harness.unprivileged_user()
        self.client_user = self.user
        self.home = self.mkdir("home", user=self.user, mode=0o755)
        self.runtime = self.mkdir("run", user=self.user, mode=0o700)
        self.work = self.mkdir("home", "work", user=self.user)
        self.bin = self.mkdir("home", "bin", user=self.user)

    def test_colod_fake_gpus_2_with_its_defaults(self):
        """`colod --fake-gpus 2` with no config: state in ~/.local/state/colo (0700, database
        0600), socket $XDG_RUNTIME_DIR/colo/colod.sock (0600 in a 0700 directory), found by
        `colo` without COLO_SOCKET; it runs a job, and SIGTERM stops it and removes its socket."""
        d = self.colod(root=self.home, user=self.user, defaults=True, use_config=False,
                       env=self.user_env(),
                       socket_path=os.path.join(self.runtime, "colo", "colod.sock"))
        self.assertEqual(d.argv()[1:], ["--fake-gpus", "2"])
        state = os.path.join(self.home, ".local", "state", "colo")
        sock_dir = os.path.join(self.runtime, "colo")
        sock = os.path.join(sock_dir, "colod.sock")
        for path, kind, mode in [(state, stat.S_ISDIR, 0o700), (sock_dir, stat.S_ISDIR, 0o700),
                                 (sock, stat.S_ISSOCK, 0o600),
                                 (os.path.join(state, "jobs"), stat.S_ISDIR, 0o700),
                                 (os.path.join(state, "colo.db"), stat.S_ISREG, 0o600),
                                 (os.path.join(state, "colo.db-wal"), stat.S_ISREG, 0o600)]:
            st = os.lstat(path)
            self.assertTrue(kind(st.st_mode), path)
            self.assertEqual(stat.S_IMODE(st.st_mode), mode, f"mode of {path}")
            self.assertEqual(st.st_uid, self.user.uid, f"owner of {path}")
        gpus = self.colo_json("gpus", cwd=self.work)
        self.assertEqual([g["index"] for g in gpus["gpus"]], [0, 1])
        self.assertEqual(gpus["backend"].lower().count("fake"), 1, gpus["backend"])
        job = self.submit("--", "sh", "-c", "echo personal $COLO_JOB_ID", cwd=self.work)
        self.assert_succeeded(job, cwd=self.work)
        self.assertEqual(self.colo_ok("logs", job, cwd=self.work).stdout,
                         f"personal {job}\n")
        self.assertEqual(d.stop(), 0)
        self.assertFalse(os.path.exists(sock), "colod left its socket behind")


class CheckConfig(DocumentedTest):
    def setUp(self):
        harness.E2ETest.setUp(self)

    def check_config(self, path, *extra):
        return subprocess.run([harness.COLOD, "--config", path, "--check-config", *extra],
                              capture_output=True, text=True, timeout=30,
                              env={"PATH": harness.SYSTEM_PATH, "HOME": self.tmp})

    def test_packaged_config_checks(self):
        """`colod --config packaging/colod.toml --check-config` accepts the shipped file, prints
        the effective settings and starts nothing."""
        state = os.path.join(self.tmp, "never-made")
        r = self.check_config(os.path.join(harness.SOURCE_DIR, "packaging", "colod.toml"),
                              "--state-dir", state)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("config ok", r.stdout)
        self.assertIn("# placement policy: worst-fit: gates memory (margin 2.0 GiB), utilization "
                      "(smact <= 0.80", r.stdout)
        self.assertIn(f'state_dir = "{state}"', r.stdout)
        self.assertIn("max_clients = 256\nmax_clients_per_user = 32\n", r.stdout)
        self.assertFalse(os.path.exists(state), "--check-config created the state directory")

    def test_changed_setting_is_printed(self):
        """A setting in the file shows in the effective settings."""
        path = self.write(os.path.join(self.tmp, "c.toml"),
                          '[scheduler]\npolicy = "best-fit"\n[limits]\nmax_clients_per_user = 3\n')
        r = self.check_config(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("# placement policy: best-fit: gates memory (margin 2.0 GiB)", r.stdout)
        self.assertIn("max_clients_per_user = 3\n", r.stdout)

    def test_errors_exit_2_naming_the_key(self):
        """A config with an error: exit 2 and a message naming the key (type errors, unknown keys,
        bad values, TOML syntax)."""
        cases = {
            '[limits]\nmax_clients = "many"\n': "limits.max_clients",
            "[scheduler]\npolcy = \"worst-fit\"\n": "scheduler.polcy",
            '[scheduler]\nsample_interval = "fast"\n': "scheduler.sample_interval",
            '[jobs]\ncgroups = "maybe"\n': "jobs.cgroups",
            '[scheduler]\npolicy = "no-such-policy"\n': "scheduler.policy",
            "[scheduler\n": "c.toml:1",
        }
        for text, key in cases.items():
            with self.subTest(key=key):
                path = self.write(os.path.join(self.tmp, "c.toml"), text)
                r = self.check_config(path)
                self.assertEqual(r.returncode, 2, f"{text!r}: {r.stdout}{r.stderr}")
                self.assertIn(key, r.stderr)

    def test_missing_config_file(self):
        """A config that cannot be read: exit 2 naming the file."""
        path = os.path.join(self.tmp, "nope.toml")
        r = self.check_config(path)
        self.assertEqual(r.returncode, 2)
        self.assertIn(path, r.stderr)


class SubmitForms(DocumentedTest):
    def test_mem_share_mps_command(self):
        """`colo submit --mem 12GiB --share mps -- python train.py --epochs 10`: the job runs in
        the submit's directory with its PATH, on one fake GPU, plainly (no MPS with fake GPUs),
        and colod says that it shared without MPS."""
        r = self.colo_ok("submit", "--mem", "12GiB", "--share", "mps", "--", "python", "train.py",
                         "--epochs", "10")
        self.assertRegex(r.stdout, r"^Submitted job \d+\n$")
        job = int(r.stdout.split()[-1])
        detail = self.assert_succeeded(job)
        self.assertEqual(detail["command"], ["python", "train.py", "--epochs", "10"])
        self.assertEqual(detail["workdir"], self.work)
        self.assertEqual(detail["memory"], 12 * GIB)
        self.assertEqual(detail["share"], "mps")
        self.assertEqual(detail["name"], "python")
        self.assertEqual(detail["user"], self.user.name)
        [attempt] = detail["attempt_list"]
        self.assertEqual(attempt["mode"], "plain")
        self.assertEqual(attempt["exit_kind"], "success")
        out = self.logs(job)
        self.assertIn("fake python train.py --epochs 10\n", out)
        self.assertIn(f"CUDA_VISIBLE_DEVICES={attempt['gpu_uuids'][0]}\n", out)
        self.assertIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=unset\n", out)
        self.assertIn("MPS unavailable, sharing without it", self.daemon.current_log())
        kinds = {e["kind"]: e["detail"] for e in detail["events"]}
        self.assertIn("mps", kinds, "the job's events do not say it ran without MPS")
        self.assertIn("without", kinds["mps"])
        self.assertIn("fake GPUs (--fake-gpus) have no MPS", kinds["mps"])
        self.assertNotIn("config", kinds["mps"])

    def test_gpus_shows_the_mode_its_jobs_run_in(self):
        """A job placed for MPS that runs plainly (no MPS here): `colo gpus` shows its GPU as
        plain, as the job runs, not mps."""
        job, release = self.wait_job("--share", "mps", "--mem", "1GiB")
        [attempt] = self.show(job)["attempt_list"]
        self.assertEqual(attempt["mode"], "plain")
        gpus = self.colo_json("gpus")["gpus"]
        on = gpus[attempt["gpus"][0]]
        self.assertEqual([(j["id"], j["mode"]) for j in on["jobs"]], [(job, "plain")])
        self.assertEqual(on["mode"], "plain")
        row = self.colo_ok("gpus").stdout.splitlines()[1 + attempt["gpus"][0]]
        self.assertIn(f" plain     {job}({self.user.name},plain)", row)
        self.release(release)
        self.assert_succeeded(job)

    def test_estimate_from_model_summary(self):
        """`colo submit --estimate-from model.json --smact 0.2 -- python train.py`: the client
        estimates from colo-profile's summary (its batch, its trace) and colod plans with the
        estimate's upper bound."""
        src = os.path.join(harness.DATA_DIR, "estimate", "tv-resnet50-b32-adam")
        shutil.copy(src + ".json", os.path.join(self.work, "model.json"))
        shutil.copy(src + ".b32.trace", os.path.join(self.work, "tv-resnet50-b32-adam.b32.trace"))
        harness.chown_tree(self.work, self.user)
        r = self.colo_ok("submit", "--estimate-from", "model.json", "--smact", "0.2", "--",
                         "python", "train.py")
        job = int(r.stdout.split()[-1])
        self.assertRegex(r.stderr, r"trace estimates [\d.]+ GiB \(plans with [\d.]+ GiB\)")
        detail = self.assert_succeeded(job)
        estimate = detail["estimate"]
        self.assertEqual(estimate["estimator"], "trace")
        self.assertGreater(estimate["upper"], estimate["peak"])
        self.assertTrue(GIB < estimate["peak"] < 16 * GIB, estimate)
        self.assertEqual(detail["memory"], estimate["upper"])
        self.assertRegex(estimate["signature"], r"^[0-9a-f]{16}-b32@uid\d+$")
        self.assertIn("fake python train.py\n", self.logs(job))

    def test_estimate_predicts_solo_smact_until_runs_measure_it(self):
        """`colo submit --estimate-from model.json --gpu-model H100`: with no --smact the client
        predicts the job's SM activity from the profile's FLOPs and trace (the GPU's fitted
        model), colod plans with it and `colo show` says so; the user's --smact wins."""
        src = os.path.join(harness.DATA_DIR, "estimate", "tv-resnet18-b32-adam")
        shutil.copy(src + ".json", os.path.join(self.work, "model.json"))
        shutil.copy(src + ".b32.trace", os.path.join(self.work, "tv-resnet18-b32-adam.b32.trace"))
        harness.chown_tree(self.work, self.user)
        r = self.colo_ok("submit", "--estimate-from", "model.json", "--gpu-model", "H100", "--",
                         "python", "train.py")
        match = re.search(r"solo SM activity ([\d.]+) predicted", r.stderr)
        self.assertIsNotNone(match, r.stderr)
        job = int(r.stdout.split()[-1])
        detail = self.assert_succeeded(job)
        predicted = detail["estimate"]["predicted_smact"]
        self.assertAlmostEqual(predicted, float(match.group(1)), places=2)
        self.assertTrue(0.05 < predicted < 1, predicted)
        self.assertAlmostEqual(detail["smact"], predicted, places=6)
        self.assertIn(f"Smact={predicted:.2f} (predicted", self.colo_ok("show", str(job)).stdout)
        r = self.colo_ok("submit", "--estimate-from", "model.json", "--gpu-model", "H100",
                         "--smact", "0.3", "--", "python", "train.py")
        self.assertNotIn("predicted", r.stderr)
        detail = self.assert_succeeded(int(r.stdout.split()[-1]))
        self.assertEqual(detail["smact"], 0.3)
        self.assertNotIn("predicted_smact", detail["estimate"])

    def test_estimate_with_batch_without_trace(self):
        """--estimate-from with a --batch the summary has no trace for still submits, with the
        best estimator that answers, and says why the trace could not."""
        src = os.path.join(harness.DATA_DIR, "estimate", "tv-resnet50-b32-adam")
        shutil.copy(src + ".json", os.path.join(self.work, "model.json"))
        r = self.colo_ok("submit", "--estimate-from", "model.json", "--batch", "64", "--",
                         "python", "train.py")
        job = int(r.stdout.split()[-1])
        self.assertIn("trace:", r.stderr)
        detail = self.assert_succeeded(job)
        self.assertNotEqual(detail["estimate"]["estimator"], "trace")
        self.assertRegex(detail["estimate"]["signature"], r"-b64@uid\d+$")

    def test_estimate_from_missing_file(self):
        """--estimate-from a file that is not there: exit 1 naming it, no job."""
        r = self.colo("submit", "--estimate-from", "nope.json", "--", "python", "train.py")
        self.assertEqual(r.returncode, 1)
        self.assertIn("nope.json", r.stderr)
        self.assertEqual(self.colo_json("queue")["jobs"], [])

    def script(self, name, text, executable, subdir=None):
        folder = self.mkdir("home", "work", subdir, user=self.user) if subdir else self.work
        return self.write(os.path.join(folder, name), text, 0o755 if executable else 0o644,
                          self.user)

    def run_script(self, *args, cwd=None):
        r = self.colo_ok("submit", *args, cwd=cwd)
        job = int(r.stdout.split()[-1])
        return self.assert_succeeded(job, cwd=cwd), self.logs(job)

    def test_job_script_not_executable_without_shebang(self):
        """`colo submit job.sh ARGS` of a script that is neither executable nor has a #! line:
        /bin/sh runs it; its #COLO lines give GPUs, memory, name; the arguments follow it."""
        body = ("#COLO --gpus=1 --mem=8GiB\n#COLO --name=plain-sh\n"
                'echo "args:$#:$1:$2"\necho "dollar0:$0"\n')
        path = self.script("job.sh", body, executable=False)
        detail, out = self.run_script("job.sh", "one", "two words")
        self.assertEqual(detail["command"], ["/bin/sh", path, "one", "two words"])
        self.assertEqual(detail["memory"], 8 * GIB)
        self.assertEqual(detail["gpus"], 1)
        self.assertEqual(detail["name"], "plain-sh")
        self.assertEqual(detail["source"], "script " + path)
        self.assertEqual(out, f"args:2:one:two words\ndollar0:{path}\n")

    def test_job_script_not_executable_with_shebang(self):
        """A non-executable script runs with its #! interpreter and that line's argument."""
        body = "#!/bin/bash -e\n#COLO --mem=2GiB\necho \"bash:${BASH_VERSION:+yes}:$1\"\n"
        path = self.script("b.sh", body, executable=False)
        detail, out = self.run_script(path, "x")
        self.assertEqual(detail["command"], ["/bin/bash", "-e", path, "x"])
        self.assertEqual(detail["memory"], 2 * GIB)
        self.assertEqual(out, "bash:yes:x\n")

    def test_job_script_executable_with_shebang(self):
        """An executable script runs as itself, found by its absolute path from a relative one."""
        body = "#!/bin/sh\n#COLO --gpus=2 --mem=1GiB --share=plain\necho \"exe:$*\"\n"
        path = self.script("e.sh", body, executable=True, subdir="sub")
        detail, out = self.run_script("./sub/e.sh", "a", "b")
        self.assertEqual(detail["command"], [path, "a", "b"])
        self.assertEqual(detail["gpus"], 2)
        self.assertEqual(len(detail["attempt_list"][0]["gpu_uuids"]), 2)
        self.assertEqual(detail["share"], "plain")
        self.assertEqual(out, "exe:a b\n")

    def test_job_script_executable_without_shebang(self):
        """An executable script without #! runs as itself too (the kernel hands it to sh)."""
        path = self.script("n.sh", "#COLO --mem=1GiB\necho \"noshebang:$1\"\n", executable=True)
        detail, out = self.run_script("n.sh", "z")
        self.assertEqual(detail["command"], [path, "z"])
        self.assertEqual(out, "noshebang:z\n")

    def test_job_script_from_another_directory(self):
        """A relative script path is resolved against the submit's directory, and the job runs
        there (not where the script is)."""
        path = self.script("w.sh", 'echo "pwd:$(pwd)"\n', executable=False, subdir="deep")
        detail, out = self.run_script("deep/w.sh")
        self.assertEqual(detail["command"], ["/bin/sh", path])
        self.assertEqual(out, f"pwd:{self.work}\n")

    def test_command_line_overrides_directives(self):
        """Options given to colo submit win over the script's #COLO lines."""
        self.script("o.sh", "#COLO --mem=8GiB --name=from-file\necho ok\n", executable=False)
        detail, _ = self.run_script("--mem", "3GiB", "--name", "from-cli", "o.sh")
        self.assertEqual(detail["memory"], 3 * GIB)
        self.assertEqual(detail["name"], "from-cli")

    def test_bad_directive_is_refused_with_file_and_line(self):
        """A wrong #COLO line: exit 1, the message names file, line and directive; no job."""
        self.script("bad.sh", "#!/bin/sh\n#COLO --mem=8GiB\n#COLO --gpus=many\necho\n", False)
        r = self.colo("submit", "bad.sh")
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad.sh:3", r.stderr)
        self.assertIn("--gpus", r.stderr)
        self.assertEqual(self.colo_json("queue")["jobs"], [])
        self.assertEqual(self.colo_json("history")["jobs"], [])

    def rad(self):
        path = os.path.join(self.work, "resnet50.rad")
        shutil.copy(os.path.join(harness.DATA_DIR, "carma", "resnet50_64.rad"), path)
        harness.chown_tree(self.work, self.user)
        return path

    def test_rad_without_conda(self):
        """`colo submit resnet50.rad` without conda on PATH: exit 1, a message that says conda is
        missing, no crash and no job."""
        self.rad()
        r = self.colo("submit", "resnet50.rad")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("conda is not on PATH", r.stderr)
        self.assertIn("'torch'", r.stderr)
        self.assertEqual(self.colo_json("queue")["jobs"], [])
        self.assertEqual(self.colo_json("history")["jobs"], [])

    def test_rad_with_conda(self):
        """`colo submit resnet50.rad` with conda on PATH: the task's command runs as
        `conda run --no-capture-output -n torch /bin/sh -c '...'` inside the environment, with
        the file's measured peak as its memory and its name from the file."""
        path = self.rad()
        conda_bin = self.mkdir("home", "conda", "bin", user=self.user)
        env_bin = self.mkdir("home", "conda", "envs", "torch", "bin", user=self.user)
        conda = self.write(os.path.join(conda_bin, "conda"), FAKE_CONDA, 0o755, self.user)
        self.write(os.path.join(env_bin, "python3"), ENV_PYTHON3, 0o755, self.user)
        r = self.colo_ok("submit", "resnet50.rad", path_prefix=conda_bin)
        job = int(r.stdout.split()[-1])
        detail = self.assert_succeeded(job)
        self.assertEqual(detail["command"],
                         [conda, "run", "--no-capture-output", "-n", "torch", "/bin/sh", "-c",
                          "python3 train.py --model resnet50 --batch-size 64"])
        self.assertEqual(detail["memory"], 8536 << 20)
        self.assertEqual(detail["name"], "resnet50")
        self.assertEqual(detail["source"], "rad " + path)
        self.assertEqual(self.logs(job),
                         "python3 of conda env torch: train.py --model resnet50 --batch-size 64\n")

    def test_a_command_that_cannot_run_is_refused_at_submit(self):
        """`colo submit resnet50.rad`, `colo submit jbo.sh`, `./jbo.sh` or `-- no-such-program`
        (no such file, nothing of that name on the job's PATH), a file that is not executable
        or a directory: refused at submit with the reason (as sbatch's "Unable to open file"),
        nothing queued. What is on the job's PATH (not colo's) runs, and so does a file named
        relative to --chdir; a script that is not executable runs with its interpreter."""
        cases = [(["resnet50.rad"], "no file of that name in"),
                 (["jbo.sh"], "no command of that name on the job's PATH"),
                 (["./jbo.sh"], "No such file or directory"),
                 (["--", "no-such-program-colo", "--flag"], "cannot run no-such-program-colo"),
                 (["--", "/tmp"], "is a directory"),
                 (["--export", "NONE", "--", "wait-for", "x"], "cannot run wait-for")]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.colo("submit", *args)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertEqual(r.stdout, "")
        self.assertEqual(self.colo_json("queue")["jobs"], [])
        self.assertEqual(self.colo_json("history")["jobs"], [])
        other_bin = self.mkdir("home", "other-bin", user=self.user)
        self.write(os.path.join(other_bin, "only-there"), "#!/bin/sh\necho there\n", 0o755,
                   self.user)
        job = self.submit("--export", f"ALL,PATH={other_bin}:/usr/bin:/bin", "--", "only-there")
        self.assert_succeeded(job)
        self.assertEqual(self.logs(job), "there\n")
        sub = self.mkdir("home", "work", "sub", user=self.user)
        self.write(os.path.join(sub, "here.sh"), "#!/bin/sh\necho here\n", 0o755, self.user)
        job = self.submit("-D", sub, "--", "./here.sh")
        self.assert_succeeded(job)
        self.assertEqual(self.logs(job), "here\n")
        self.write(os.path.join(self.work, "not-exec.sh"), "echo plain\n", 0o644, self.user)
        job = self.submit("./not-exec.sh")
        self.assert_succeeded(job)
        self.assertEqual(self.logs(job), "plain\n")

    def test_a_command_gone_by_its_start_fails_as_a_job(self):
        """A program that was there at submit and is gone when the job starts: the job fails
        with exit 127, told in its reason and its stderr."""
        program = self.write(os.path.join(self.bin, "vanishes"), "#!/bin/sh\n", 0o755, self.user)
        job = self.submit("--hold", "--", "vanishes")
        os.unlink(program)
        self.colo_ok("release", job)
        detail = self.wait_state(job, TERMINAL)
        self.assertEqual(detail["state"], "failed")
        self.assertIn("127", detail["reason"])
        logs = self.colo("logs", job, "--stderr")
        self.assertEqual(logs.returncode, 1, "colo logs exits like the job")
        self.assertIn("vanishes", logs.stdout)


class Commands(DocumentedTest):
    def test_queue_show_logs(self):
        """`colo queue`, `colo show N`, `colo logs N` (and --stderr) of a running job, in text
        and --json."""
        job, release = self.wait_job("--name", "waiter", "--mem", "1GiB")
        queue = self.colo_ok("queue").stdout.splitlines()
        self.assertEqual(queue[0].split(), ["JOBID", "NAME", "USER", "ST", "NGPU", "MEM", "TIME",
                                            "GPUS(REASON)"])
        row = next(line for line in queue[1:] if line.split()[0] == str(job))
        self.assertEqual(row.split()[1:5], ["waiter", self.user.name[:10], "R", "1"])
        self.assertRegex(row, r" [01] \(plain\)$")  # the GPU's index and how it shares
        q = self.colo_json("queue")
        self.assertEqual([(j["id"], j["state"]) for j in q["jobs"]], [(job, "running")])
        show = self.colo_ok("show", job).stdout
        self.assertIn(f"JobId={job} Name=waiter User={self.user.name} State=RUNNING", show)
        self.assertIn("Command=wait-for " + release, show)
        wait_until(lambda: "started" in self.logs(job), 10, "the job's first line")
        self.assertEqual(self.logs(job), f"started {job}\n")
        self.assertEqual(self.logs(job, "--stderr"), f"on stderr {job}\n")
        logs = self.colo_json("logs", job)
        self.assertEqual((logs["state"], logs["attempt"]), ("running", 1))
        self.assertTrue(logs["stdout"].endswith("attempt-1.out") or logs["stdout"], logs)
        self.release(release)
        self.assert_succeeded(job)
        self.assertEqual(self.logs(job), f"started {job}\nfinished {job}\n")
        self.assertEqual(self.colo_json("queue")["jobs"], [])

    def test_logs_follow_until_the_job_ends(self):
        """`colo logs N -f` prints what the job writes while it runs and returns when it ends."""
        job, release = self.wait_job()
        out_path = os.path.join(self.tmp, "follow.out")
        with open(out_path, "wb") as out:
            env = self.client_env(self.user)
            follow = subprocess.Popen(harness.as_user(self.user, [harness.COLO, "logs", str(job),
                                                                  "-f"]),
                                      stdout=out, stderr=subprocess.STDOUT, env=env,
                                      cwd=self.work)
        try:
            def printed(text):
                with open(out_path) as f:
                    return text in f.read()
            wait_until(lambda: printed(f"started {job}"), 15, "logs -f to print the first line")
            self.assertIsNone(follow.poll(), "logs -f returned while the job runs")
            self.release(release)
            self.assertEqual(follow.wait(15), 0)
            self.assertTrue(printed(f"finished {job}"), "logs -f missed the last line")
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()

    def test_logs_of_a_waiting_job(self):
        """`colo logs N` of a job that has not started says so and succeeds."""
        blockers = [self.wait_job("--mem", "70GiB") for _ in range(2)]
        waiting = self.submit("--mem", "70GiB", "--", "true")
        r = self.colo_ok("logs", waiting)
        self.assertIn("has not started", r.stderr)
        self.assertEqual(self.colo_json("logs", waiting)["attempt"], 0)
        for job, release in blockers:
            self.release(release)
        self.assert_succeeded(waiting)

    def test_cancel_running_and_waiting(self):
        """`colo cancel N` of a running job (SIGTERM, state cancelled), of a job that ignores
        SIGTERM (SIGKILL after cancel_grace), of a waiting job, and of an ended one (refused)."""
        job, _ = self.wait_job()
        r = self.colo_ok("cancel", job)
        self.assertEqual(r.stdout, f"job {job}: cancelling\n")
        detail = self.wait_state(job, TERMINAL)
        self.assertEqual(detail["state"], "cancelled")

        stubborn_release = os.path.join(self.work, "never")
        stubborn = self.submit("--", "sh", "-c",
                               "trap '' TERM; echo ready; exec wait-for \"$0\"", stubborn_release)
        self.wait_state(stubborn, "running")
        wait_until(lambda: "ready" in self.logs(stubborn), 10, "the stubborn job to trap TERM")
        began = time.monotonic()
        self.assertEqual(self.colo_json("cancel", stubborn)["state"], "cancelling")
        self.assertEqual(self.wait_state(stubborn, TERMINAL)["state"], "cancelled")
        self.assertGreaterEqual(time.monotonic() - began, 0.9, "killed before cancel_grace")
        self.assertEqual(harness.processes_with_token(self.token, f"COLO_JOB_ID={stubborn}\0"), [])

        blockers = [self.wait_job("--mem", "70GiB") for _ in range(2)]
        waiting = self.submit("--mem", "70GiB", "--", "true")
        self.assertEqual(self.colo_ok("cancel", waiting).stdout, f"job {waiting}: cancelled\n")
        detail = self.show(waiting)
        self.assertEqual(detail["state"], "cancelled")
        self.assertEqual(detail["attempt_list"], [])
        r = self.colo("cancel", waiting)
        self.assertEqual(r.returncode, 1)
        self.assertIn("already ended", r.stderr)
        for b, release in blockers:
            self.release(release)
            self.assert_succeeded(b)

    def test_explain_a_waiting_job(self):
        """`colo explain N` of a job that waits names, per GPU, the gate that stopped it; of a
        running job, that it runs."""
        blockers = [self.wait_job("--mem", "70GiB") for _ in range(2)]
        waiting = self.submit("--mem", "70GiB", "--name", "big", "--", "true")
        second = self.submit("--mem", "20GiB", "--", "true")
        # Backfill: a small job starts on a GPU not kept for the waiting head.
        small = self.submit("--mem", "1GiB", "--", "true")
        self.assert_succeeded(small)
        self.assertEqual(self.show(waiting)["state"], "queued")
        text = self.colo_ok("explain", waiting).stdout
        self.assertIn(f"job {waiting} (PENDING):", text)
        self.assertIn("position 1 of 2 in the main queue", text)
        self.assertIn("reservation: GPU", text)
        self.assertRegex(text, r"GPU 0 +memory")
        self.assertRegex(text, r"GPU 1 +memory")
        e = self.colo_json("explain", waiting)
        self.assertEqual((e["job"], e["state"], e["position"], e["queue"]),
                         (waiting, "queued", 1, "main"))
        self.assertEqual(sorted(g["gpu"] for g in e["gpus"]), [0, 1])
        self.assertTrue(all(g["gate"] == "memory" for g in e["gpus"]), e)
        e2 = self.colo_json("explain", second)
        self.assertEqual(e2["position"], 2)
        self.assertIn("2nd of 2 in the queue", e2["summary"])
        queue = self.colo_ok("queue").stdout
        row = next(line for line in queue.splitlines() if line.split()[0] == str(waiting))
        self.assertIn(" PD ", row)
        self.assertIn("(", row)
        running = self.colo_json("explain", blockers[0][0])
        self.assertEqual(running["summary"], "running; nothing to explain")
        for job, release in blockers:
            self.release(release)
        self.assert_succeeded(waiting)
        self.assert_succeeded(second)
        self.assertIn("ended", self.colo_json("explain", waiting)["summary"])

    def test_exclusive_job(self):
        """`--share exclusive`: waits while every GPU has a job, then runs alone on a GPU, and no
        other job joins it there."""
        a, release_a = self.wait_job("--mem", "1GiB")
        b, release_b = self.wait_job("--mem", "1GiB")
        self.assertNotEqual(self.show(a)["gpu_uuids"], self.show(b)["gpu_uuids"])
        excl = self.submit("--share", "exclusive", "--", "wait-for", release_a + "-x")
        self.assertEqual(self.show(excl)["state"], "queued")
        self.assertTrue(self.colo_json("explain", excl)["gpus"])
        self.release(release_a)
        self.assert_succeeded(a)
        detail = self.wait_state(excl, "running")
        self.assertEqual(detail["attempt_list"][0]["mode"], "exclusive")
        others = [self.submit("--mem", "1GiB", "--", "true") for _ in range(3)]
        for job in others:
            self.assertNotEqual(self.assert_succeeded(job)["gpu_uuids"], detail["gpu_uuids"])
        self.release(release_a + "-x")
        self.release(release_b)
        self.assert_succeeded(excl)
        self.assert_succeeded(b)

    def test_history(self):
        """`colo history` lists ended jobs newest first with their end and reason; --json too;
        --limit bounds it."""
        ok = self.submit("--name", "good", "--", "true")
        self.assert_succeeded(ok)
        bad = self.submit("--name", "bad", "--", "sh", "-c", "echo broken >&2; exit 3")
        self.assertEqual(self.wait_state(bad, TERMINAL)["state"], "failed")
        lines = self.colo_ok("history").stdout.splitlines()
        self.assertEqual(lines[0].split()[-3:], ["TIME", "END", "REASON"])
        self.assertEqual([line.split()[0] for line in lines[1:]], [str(bad), str(ok)])
        self.assertEqual(lines[1].split()[1:4], ["bad", self.user.name[:10], "F"])
        self.assertIn("exit code 3", lines[1])
        self.assertEqual(lines[2].split()[3], "CD")
        h = self.colo_json("history")
        self.assertEqual([(j["id"], j["state"]) for j in h["jobs"]],
                         [(bad, "failed"), (ok, "succeeded")])
        self.assertEqual([j["id"] for j in self.colo_json("history", "--limit", "1")["jobs"]],
                         [bad])
        self.assertEqual(len(self.colo_json("history", "--all")["jobs"]), 2)

    @unittest.skipIf(harness.SANITIZED, "510 jobs take minutes with sanitized binaries; the "
                     "release run covers the paging")
    def test_history_pages(self):
        """`colo history --limit N` above one page (500 jobs) reads every page: each ended job
        once, newest first; the default shows 50."""
        count = 510
        [s] = harness.connect_as(self.daemon.socket, self.user)
        with s:
            s.settimeout(30)
            request = json.dumps({"api": 1, "op": "submit", "command": ["true"],
                                  "workdir": self.work, "env": [self.token],
                                  "name": "many", "memory": 1 << 30}).encode() + b"\n"
            s.sendall(request * count)
            replies = [json.loads(line) for line in harness.read_lines(s, count)]
        self.assertTrue(all(r["ok"] for r in replies), replies[:3])
        jobs = [r["job"] for r in replies]
        wait_until(lambda: not self.colo_json("queue")["jobs"], 120, "every job to end")
        history = self.colo_json("history", "--limit", "1000")["jobs"]
        self.assertEqual([j["id"] for j in history], sorted(jobs, reverse=True))
        self.assertTrue(all(j["state"] == "succeeded" for j in history))
        text = self.colo_ok("history", "--limit", "600").stdout.splitlines()
        self.assertEqual(len(text), 1 + count)
        self.assertEqual(len(self.colo_json("history")["jobs"]), 50)

    def test_gpus(self):
        """`colo gpus` shows both fake GPUs with memory, power, mode and the jobs on them."""
        job, release = self.wait_job("--name", "ongpu", "--mem", "10GiB")
        text = self.colo_ok("gpus").stdout.splitlines()
        self.assertEqual(text[0].split()[:4], ["GPU", "NAME", "USED", "TOTAL"])
        self.assertEqual(len(text), 3)
        self.assertTrue(any(f"{job}({self.user.name},plain)" in line for line in text[1:]), text)
        g = self.colo_json("gpus")
        self.assertEqual(len(g["gpus"]), 2)
        for gpu in g["gpus"]:
            self.assertEqual(gpu["memory_total"], 80 * GIB)
            self.assertEqual(gpu["mode"], "plain")
        jobs = [j for gpu in g["gpus"] for j in gpu["jobs"]]
        self.assertEqual([(j["id"], j["name"], j["user"]) for j in jobs],
                         [(job, "ongpu", self.user.name)])
        on = next(gpu for gpu in g["gpus"] if gpu["jobs"])
        self.assertLessEqual(on["free_for_placement"], 70 * GIB)
        self.release(release)
        self.assert_succeeded(job)

    def test_every_command_takes_json(self):
        """submit, queue, show, logs, cancel, explain, history and gpus all print one JSON
        object with "ok": true for --json."""
        job, release = self.wait_job()
        for args in [("queue",), ("show", job), ("logs", job), ("explain", job), ("history",),
                     ("history", "--all"), ("gpus",), ("cancel", job)]:
            with self.subTest(args=args):
                self.assertIs(self.colo_json(*args).get("ok"), True)
        self.wait_state(job, TERMINAL)

    def test_unwritable_output(self):
        """Output that cannot be written (stdout on a full device) is an error (exit 1 and a
        message), whether it is small or larger than stdio's buffer: never a crash and never a
        silent success."""
        long_args = [f"argument-{i:05d}-" + "x" * 20 for i in range(600)]
        job = self.submit("--name", "long", "--", "true", *long_args)
        self.assert_succeeded(job)
        for args in [("show", job), ("show", "--json", job), ("queue",), ("gpus",)]:
            with open("/dev/full", "w") as full:
                r = subprocess.run(harness.as_user(self.user, [harness.COLO, *map(str, args)]),
                                   stdout=full, stderr=subprocess.PIPE, text=True, timeout=30,
                                   env=self.client_env(self.user), cwd=self.work)
            self.assertEqual(r.returncode, 1, f"{args}: {r.stderr}")
            self.assertIn("No space left on device", r.stderr)

    def test_errors(self):
        """Unknown jobs and wrong arguments: exit 1 (or CLI11's usage code), a message, never a
        crash."""
        for args in [("show", 999), ("logs", 999), ("cancel", 999), ("explain", 999)]:
            r = self.colo(*args)
            self.assertEqual(r.returncode, 1, args)
            self.assertIn("no job 999", r.stderr)
        for args in [("show", "abc"), ("submit",), ("submit", "--mem", "lots", "--", "true"),
                     ("submit", "--share", "fast", "--", "true"), ("bogus",),
                     ("submit", "--workdir", "/nonexistent", "--", "true")]:
            r = self.colo(*args)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertTrue(r.stderr.strip(), args)
        self.assertEqual(self.colo_json("queue")["jobs"], [])


class RunningJobs(DocumentedTest, lifecycle.LifecycleTests):
    """How a personal colod (no cgroups: sessions and descendants) runs jobs."""

    def tmpdir_for_jobs(self):
        return self.work

    def daemon_under_test(self):
        return self.daemon


class Metrics(DocumentedTest):
    """Metrics for Prometheus: opt-in, on loopback, a connection pool of their own."""

    def setUp(self):
        harness.E2ETest.setUp(self)
        self.user = harness.unprivileged_user()
        self.client_user = self.user
        self.home = self.mkdir("home", user=self.user, mode=0o755)
        self.runtime = self.mkdir("run", user=self.user, mode=0o700)
        self.work = self.mkdir("home", "work", user=self.user)
        self.bin = self.mkdir("home", "bin", user=self.user)
        self.write(os.path.join(self.bin, "wait-for"), WAIT_SCRIPT, 0o755, self.user)
        self.port = harness.free_loopback_port()
        self.daemon = self.start_personal(
            config={"metrics": {"enabled": True, "port": self.port, "max_clients": 2}})

    def test_metrics(self):
        """GET /metrics on 127.0.0.1 gives the queue, running jobs, GPUs and placements; another
        path is 404; scrapers filling their pool lock no API user out."""
        job, release = self.wait_job()
        status, body = harness.http_get(self.port, "/metrics")
        self.assertEqual(status, "HTTP/1.1 200 OK")
        for line in ("colo_running_jobs 1", 'colo_queue_jobs{queue="main"} 0',
                     'colo_gpu_memory_total_bytes{gpu="0"'):
            self.assertIn(line, body)
        self.assertRegex(body, r'colo_placements_total\{policy="[^"]+"\} 1')
        self.assertEqual(harness.http_get(self.port, "/other")[0], "HTTP/1.1 404 Not Found")
        held = [socket.create_connection(("127.0.0.1", self.port), timeout=5) for _ in range(3)]
        try:
            self.colo_ok("queue")
        finally:
            for s in held:
                s.close()
        self.release(release)
        self.assert_succeeded(job)
        self.assertIn("colo_running_jobs 0", harness.http_get(self.port, "/metrics")[1])


class Refusals(DocumentedTest):
    def test_too_much_memory_is_refused_at_submit(self):
        """`--mem 80GiB` on 80 GiB GPUs with a 2 GiB margin can never run: refused at submit
        with the reason, nothing queued."""
        r = self.colo("submit", "--mem", "80GiB", "--", "true")
        self.assertEqual(r.returncode, 1)
        # As docs/faq.md quotes it.
        self.assertEqual(r.stderr, "colo: needs 82.0 GiB per GPU including the policy's margin; "
                                   "the largest GPU has 80.0 GiB\n")
        self.assertEqual(self.colo_json("queue")["jobs"], [])
        self.assertEqual(self.colo_json("history")["jobs"], [])
        job = self.submit("--mem", "78GiB", "--", "true")  # exactly at the margin: fits
        self.assert_succeeded(job)

    def test_too_many_gpus_is_refused_at_submit(self):
        """`--gpus 3` on two GPUs: refused at submit; `--gpus 2` runs."""
        r = self.colo("submit", "--gpus", "3", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "colo: needs 3 GPUs on one server; the largest has 2\n")
        self.assertEqual(self.colo_json("queue")["jobs"], [])
        job = self.submit("--gpus", "2", "--", "true")
        self.assertEqual(len(self.assert_succeeded(job)["attempt_list"][0]["gpu_uuids"]), 2)

    def test_terminal_escapes_in_a_name_are_shown_escaped(self):
        """A job name with terminal escape sequences is printed escaped by `colo queue`,
        `colo show`, `colo history` and `colo gpus`: no control byte reaches the terminal."""
        name = "x\x1b]0;owned\x07\x1b[2J\x9b1m\u202ey"
        job, release = self.wait_job("--name", name)
        for args in [("queue",), ("show", job)]:
            out = self.colo_ok(*args).stdout
            self.assertIn("x\\x1b]0;owned\\x07", out, args)
            self.assertFalse(any(ord(c) < 32 and c not in "\n\t" or 0x7f <= ord(c) <= 0x9f or
                                 c == "\u202e" for c in out), f"{args}: {out!r}")
        self.assertIn("\\u{202e}y", self.colo_ok("show", job).stdout)
        self.assertEqual(self.show(job)["name"], name)
        self.release(release)
        self.assert_succeeded(job)
        out = self.colo_ok("history").stdout
        self.assertIn("x\\x1b]0;", out)
        self.assertNotIn("\x1b", out)

    def test_terminal_escapes_from_a_job_are_shown_escaped(self):
        """Escape sequences in a job's command, working directory and error output (its
        reason) are printed escaped by `colo show`, `colo history` and `colo explain`."""
        odd = self.mkdir("home", "work", "dir\x1b[31m", user=self.user)
        job = self.submit("--", "sh", "-c", "printf '\\033]0;pwn\\007\\033[2J\\n' >&2; exit 4",
                          "\x1b[5m", cwd=odd)
        self.assertEqual(self.wait_state(job, TERMINAL)["state"], "failed")
        for args in [("show", job), ("history",), ("explain", job), ("queue",)]:
            out = self.colo_ok(*args).stdout
            self.assertNotIn("\x1b", out, args)
            self.assertNotIn("\x07", out, args)
        show = self.colo_ok("show", job).stdout
        self.assertIn("dir\\x1b[31m", show)
        self.assertIn("\\x1b]0;pwn\\x07", show)


class ClientNeverCrashes(harness.E2ETest):
    """colo against a server that misbehaves: an error and exit 1, never a signal."""

    def fake_server(self, reply):
        path = os.path.join(self.tmp, "fake.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(8)
        server.settimeout(0.2)
        stop = threading.Event()

        def serve():
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    continue
                with conn:
                    conn.settimeout(5)
                    try:
                        conn.recv(65536)
                        if reply is not None:
                            conn.sendall(reply)
                    except OSError:
                        pass

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()

        def close():
            stop.set()
            thread.join(5)
            server.close()
        self.addCleanup(close)
        return path

    def test_bad_replies(self):
        """Closed connections, garbage, JSON of the wrong shape, huge numbers: exit 1."""
        replies = [None, b"", b"garbage\n", b"[1,2]\n", b'{"ok":true,"jobs":"no"}\n',
                   b'{"ok":true,"job":{"id":1e300}}\n', b'{"ok":false}\n',
                   b'{"ok":true,"gpus":[{"index":-5,"memory_total":1e400}]}\n',
                   b'{"ok":true,"jobs":[{"id":1,"state":"weird","name":"\\u001b[2J"}]}\n',
                   b"\xff\xfe\n"]
        commands = [("queue",), ("show", 1), ("gpus",), ("history",), ("logs", 1),
                    ("submit", "--", "true"), ("cancel", 1), ("explain", 1)]
        for i, reply in enumerate(replies):
            path = self.fake_server(reply)
            for args in commands:
                with self.subTest(reply=reply, args=args):
                    r = self.colo("--socket", path, *args,
                                  env={"PATH": harness.SYSTEM_PATH, "HOME": self.tmp})
                    self.assertIn(r.returncode, (0, 1), r.stderr)
                    self.assertNotIn("\x1b", r.stdout + r.stderr)
            os.unlink(path)

    def test_no_daemon(self):
        """No colod at the socket: exit 1 with a message naming the socket."""
        path = os.path.join(self.tmp, "none.sock")
        r = self.colo("--socket", path, "queue")
        self.assertEqual(r.returncode, 1)
        self.assertIn(path, r.stderr)


if __name__ == "__main__":
    harness.main()
