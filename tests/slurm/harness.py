"""Slurm test harness: a real 3-node Slurm cluster (tests/slurm/cluster.sh) per test file.

The cluster comes up once per test class (setUpClass) in a fresh temporary directory and goes
down in tearDownClass, and at exit whatever happened (a failed setUp, an exception, SIGTERM from
ctest's timeout). Every Slurm command runs with SLURM_CONF pointing into that directory; nothing
in /etc/slurm or /etc/munge is used. Every wait has a deadline.

A test file that cannot run here (not root, Slurm or munge not installed, the users colo-alice and
colo-bob missing) exits 77: skipped. colod comes from $COLO_BIN_DIR (set by ctest), else build/bin
of the source tree; a missing colod is a failure.
"""

import atexit
import fcntl
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
CLUSTER_SH = os.path.join(HERE, "cluster.sh")
BIN_DIR = os.environ.get("COLO_BIN_DIR") or os.path.join(SOURCE_DIR, "build", "bin")
COLOD = os.path.join(BIN_DIR, "colod")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USERS = ("colo-alice", "colo-bob")
NODES = ("n1", "n2", "n3")
COLO_SOCKET_DIR = "/run/colo-slurm"

# Deadlines (seconds). Generous: CI shares two cores between these and other work.
CLUSTER_DEADLINE = 120  # cluster.sh up or down
MACHINE_DEADLINE = 180  # another test file's cluster on this machine to go
COMMAND_DEADLINE = 30  # one Slurm command
JOB_DEADLINE = 60  # a job to reach a state

# What a job that ended is in (squeue -t all, scontrol show job).
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE")

REQUIRED_PROGRAMS = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch",
                     "/usr/bin/squeue", "/usr/bin/scontrol", "/usr/sbin/munged", "/usr/bin/munge")


def skip_file(reason):
    """Ends a whole test file as skipped (ctest: SKIP_RETURN_CODE 77)."""
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP)


def check_can_run():
    """Exits 77 where the cluster cannot come up; exits 1 without colod (a build without it is
    a failure, not a reason to skip)."""
    if os.geteuid() != 0:
        skip_file("the Slurm cluster needs root (network namespaces, munged, slurmd)")
    missing = [p for p in REQUIRED_PROGRAMS if not os.access(p, os.X_OK)]
    if missing:
        skip_file(f"Slurm is not installed ({', '.join(missing)} missing; apt-get install "
                  "slurmctld slurmd slurm-client munge)")
    for tool in ("ip", "unshare", "runuser"):
        if shutil.which(tool, path=SYSTEM_PATH) is None:
            skip_file(f"{tool} is missing")
    for user in USERS:
        try:
            pwd.getpwnam(user)
        except KeyError:
            skip_file(f"user {user} is missing (.ci/run creates it)")
    if not os.access(COLOD, os.X_OK):
        print(f"missing binary {COLOD} (build colod)", file=sys.stderr)
        sys.exit(1)


def wait_until(predicate, deadline, what, interval=0.1):
    """Polls `predicate` until it returns a true value, which is returned; fails at the
    deadline."""
    end = time.monotonic() + deadline
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {deadline} s waiting for {what}")
        time.sleep(interval)


def parse_record(line):
    """`Key=Value Key=Value ...` (scontrol show -o) as a dict. A value runs to the next
    ` Key=`, so values with blanks (Command, Comment) stay whole."""
    fields = {}
    marks = list(re.finditer(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=", line))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        fields[m.group(1)] = line[m.end():end].strip()
    return fields


class Cluster:
    """One cluster brought up by cluster.sh in `root`."""

    def __init__(self, root):
        self.root = root
        self.conf = os.path.join(root, "slurm.conf")
        self.up_seconds = None

    def script(self, *args, deadline=CLUSTER_DEADLINE, check=True):
        env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "COLOD": COLOD}
        # What cluster.sh takes from its environment: the plugin, each node's GPUs, colod's
        # waits, whether jobs are kept to their GPUs.
        for name in ("COLO_SPANK", "COLO_CLUSTER_GPUS", "COLO_WAIT_LIMIT", "COLO_LAUNCH_GRACE",
                     "COLO_ISOLATION"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        result = subprocess.run([CLUSTER_SH] + list(args), env=env, capture_output=True,
                                text=True, errors="replace", timeout=deadline,
                                stdin=subprocess.DEVNULL)
        if check and result.returncode != 0:
            raise AssertionError(f"cluster.sh {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def up(self):
        start = time.monotonic()
        self.script("up", self.root)
        self.up_seconds = time.monotonic() - start

    def down(self):
        return self.script("down", self.root, check=False)

    def env(self, extra=None):
        env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "SLURM_CONF": self.conf}
        env.update(extra or {})
        return env

    def logs(self):
        """The tails of every daemon's log, for a failure's report."""
        text = []
        for rel in ["ctld/slurmctld.log"] + [f"nodes/{n}/slurmd.log" for n in NODES] + \
                [f"colo/{n}/colod.log" for n in NODES]:
            try:
                with open(os.path.join(self.root, rel), errors="replace") as f:
                    lines = f.readlines()[-30:]
                text.append(f"--- {rel}:\n{''.join(lines)}")
            except OSError:
                pass
        return "\n".join(text)


_active_clusters = []
_machine_lock = None


def lock_machine():
    """Waits (at most MACHINE_DEADLINE) until no other test process has a cluster on this
    machine, and keeps it so until this process exits: the bridge, namespaces and ports are
    the machine's, so test files (another checkout's too) take turns."""
    global _machine_lock
    if _machine_lock is not None:
        return
    directory = "/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()
    fd = os.open(os.path.join(directory, "colo-slurm-tests.lock"),
                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        wait_until(lambda: _try_flock(fd), MACHINE_DEADLINE,
                   "another Slurm test cluster on this machine to go", interval=0.5)
    except BaseException:
        os.close(fd)
        raise
    _machine_lock = fd


def _try_flock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _down_all():
    while _active_clusters:
        cluster = _active_clusters.pop()
        try:
            cluster.down()
        finally:
            shutil.rmtree(cluster.root, ignore_errors=True)


atexit.register(_down_all)


def _terminate(signum, frame):
    # ctest's timeout sends SIGTERM: exit through atexit, so that the cluster goes down.
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _terminate)


class SlurmClusterTest(unittest.TestCase):
    """Tests against one cluster per class: self.cluster, helpers for sbatch and friends."""

    cluster = None

    @classmethod
    def setUpClass(cls):
        lock_machine()
        root = tempfile.mkdtemp(prefix="colo-slurm-")
        os.chmod(root, 0o755)
        cls.cluster = Cluster(root)
        _active_clusters.append(cls.cluster)
        try:
            cls.cluster.up()
        except BaseException:
            _down_all()
            raise
        print(f"\ncluster up in {cls.cluster.up_seconds:.1f} s in {root}", file=sys.stderr)
        cls.job_count = 0

    @classmethod
    def tearDownClass(cls):
        if cls.cluster in _active_clusters:
            _active_clusters.remove(cls.cluster)
            start = time.monotonic()
            result = cls.cluster.down()
            print(f"cluster down in {time.monotonic() - start:.1f} s", file=sys.stderr)
            shutil.rmtree(cls.cluster.root, ignore_errors=True)
            if result.returncode != 0:
                raise AssertionError(f"cluster.sh down failed:\n{result.stderr}")

    def setUp(self):
        self._problems_before = self._problem_count()
        self.addCleanup(self._report_on_failure)

    def _problem_count(self):
        # The failures and errors the result holds so far (_Outcome.success stays True after a
        # failure in Python 3.11, so it cannot tell).
        result = getattr(getattr(self, "_outcome", None), "result", None)
        return len(getattr(result, "failures", [])) + len(getattr(result, "errors", []))

    def _report_on_failure(self):
        if self._problem_count() > self._problems_before:
            print(f"--- squeue:\n{self.slurm('squeue', '-t', 'all', check=False).stdout}\n"
                  f"{self.cluster.logs()}", file=sys.stderr)

    # --- Commands ---

    def slurm(self, *argv, user=None, cwd=None, check=True, deadline=COMMAND_DEADLINE):
        """Runs a Slurm command (as `user` through runuser, else as root) with this cluster's
        SLURM_CONF; the CompletedProcess (text)."""
        argv = [str(a) for a in argv]
        env = self.cluster.env()
        if user is not None:
            argv = ["runuser", "-u", user, "--", "env"] + \
                   [f"{k}={v}" for k, v in env.items()] + argv
        result = subprocess.run(argv, env=env, cwd=cwd or self.cluster.root, capture_output=True,
                                text=True, errors="replace", timeout=deadline,
                                stdin=subprocess.DEVNULL)
        if check and result.returncode != 0:
            self.fail(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}\n"
                      f"{result.stderr}")
        return result

    def scontrol(self, *args, **kwargs):
        return self.slurm("scontrol", *args, **kwargs)

    def workdir(self, user):
        """DIR/work/USER, which cluster.sh gave to `user`."""
        return os.path.join(self.cluster.root, "work", user)

    def write_script(self, user, script_text):
        """A batch script in the user's working directory, owned by the user."""
        cls = type(self)
        cls.job_count += 1
        path = os.path.join(self.workdir(user), f"job-{cls.job_count}.sh")
        if not script_text.startswith("#!"):
            script_text = "#!/bin/bash\n" + script_text
        with open(path, "w") as f:
            f.write(script_text)
        pw = pwd.getpwnam(user)
        os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(path, 0o755)
        return path

    def sbatch_result(self, user, script_text, options=()):
        """`sbatch --parsable OPTIONS SCRIPT` as `user` in its working directory, unchecked."""
        script = self.write_script(user, script_text)
        return self.slurm("sbatch", "--parsable", *options, script, user=user,
                          cwd=self.workdir(user), check=False)

    def sbatch(self, user, script_text, options=()):
        """Submits `script_text` as `user` (its output in its working directory, slurm-J.out
        unless OPTIONS say otherwise); the job id."""
        result = self.sbatch_result(user, script_text, options)
        self.assertEqual(result.returncode, 0, f"sbatch {' '.join(options)} failed:\n"
                                               f"{result.stdout}\n{result.stderr}")
        return int(result.stdout.strip().split(";")[0])

    def job_info(self, job_id):
        """`scontrol show job -o J` as a dict (JobState, NodeList, TresPerNode, StdOut...); {}
        when Slurm no longer knows the job."""
        result = self.scontrol("show", "job", "-o", job_id, check=False)
        if result.returncode != 0 or not result.stdout.strip():
            return {}
        return parse_record(result.stdout.strip().splitlines()[0])

    def squeue(self, *args):
        """Every job Slurm knows (finished ones too): dicts with id, state, user, nodes, reason,
        tres_per_node, restarts."""
        fields = ("id", "state", "user", "nodes", "reason", "tres_per_node", "restarts")
        out = self.slurm("squeue", "-h", "-t", "all", "-O",
                         "JobID:|,State:|,UserName:|,NodeList:|,Reason:|,tres-per-node:|,"
                         "RestartCnt:|", *args).stdout
        jobs = []
        for line in out.splitlines():
            values = [v.strip() for v in line.split("|")]
            if len(values) >= len(fields):
                job = dict(zip(fields, values))
                job["id"] = int(job["id"])
                jobs.append(job)
        return jobs

    def wait_for(self, job_id, states, deadline=JOB_DEADLINE):
        """Polls the job until its state is one of `states`; its job_info."""
        states = {states} if isinstance(states, str) else set(states)
        last = {}

        def reached():
            last["info"] = self.job_info(job_id)
            state = last["info"].get("JobState")
            return last["info"] if state in states else None

        try:
            return wait_until(reached, deadline, f"job {job_id} to be {sorted(states)}")
        except AssertionError as e:
            raise AssertionError(f"{e}; last seen: {last.get('info')}")

    def wait_finished(self, job_id, deadline=JOB_DEADLINE):
        return self.wait_for(job_id, FINISHED, deadline)

    def assert_completed(self, job_id, deadline=JOB_DEADLINE):
        """Waits until the job ended; it must have COMPLETED. Its job_info."""
        info = self.wait_finished(job_id, deadline)
        self.assertEqual(info.get("JobState"), "COMPLETED",
                         f"job {job_id}: {info}\noutput:\n{self.output_of(job_id, info)}")
        return info

    def requeue_now(self, job_id, deadline=JOB_DEADLINE):
        """Requeues a batch job (running or just finished) so that it runs again at once:
        `scontrol requeue`, wait until PENDING, `scontrol update StartTime=now+1`. (now+1, not
        now: a job started again on the same node within the second of its requeue is killed
        by slurmd with "Job credential revoked".) Returns once the job is PENDING again."""
        self.scontrol("requeue", job_id)
        self.wait_for(job_id, "PENDING", deadline)
        self.scontrol("update", f"JobId={job_id}", "StartTime=now+1")

    def node_of(self, job_id):
        """The node(s) a job ran on (NodeList, e.g. n2 or n[1-3])."""
        info = self.job_info(job_id)
        return info.get("NodeList") or info.get("BatchHost")

    def output_of(self, job_id, info=None):
        """What the job wrote to its StdOut file ('' when none)."""
        info = info or self.job_info(job_id)
        path = info.get("StdOut")
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def expand_nodes(self, nodelist):
        return self.scontrol("show", "hostnames", nodelist).stdout.split()


def main():
    check_can_run()
    unittest.main(verbosity=2)
