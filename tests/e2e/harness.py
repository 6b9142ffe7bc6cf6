"""End-to-end test harness: the real colod, colo and colo-shim binaries.

Everything a test starts lives in a temporary directory of its own: colod's config, state
directory and socket, the jobs' working directories and fake programs. Nothing here touches
/run/colo or /var/lib/colo. Every wait has a deadline; every daemon and job a test started is
killed when the test ends, failed or not (jobs are found by a token in their environment).

The binaries come from $COLO_BIN_DIR (set by ctest), else build/bin of the source tree.
"""

import atexit
import collections
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
BIN_DIR = os.environ.get("COLO_BIN_DIR") or os.path.join(SOURCE_DIR, "build", "bin")
COLO = os.path.join(BIN_DIR, "colo")
COLOD = os.path.join(BIN_DIR, "colod")
SHIM = os.path.join(BIN_DIR, "colo-shim")
DATA_DIR = os.path.join(SOURCE_DIR, "tests", "data")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

# Deadlines (seconds). Generous, as CI shares two cores between these and the unit tests, and
# longer for binaries built with sanitizers (make asan runs these tests too).
SANITIZED = os.environ.get("COLO_E2E_SANITIZED") == "1"
SLOWER = 3 if SANITIZED else 1
START_DEADLINE = 20 * SLOWER  # a colod process to start or exit
CLIENT_DEADLINE = 30 * SLOWER  # one colo command
JOB_DEADLINE = 30  # a job to reach a state (wait_until scales it)
# Passed on to colod and colo, whose environments are otherwise made from scratch.
SANITIZER_ENV = {k: v for k, v in os.environ.items()
                 if k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS")}


def skip_file(reason):
    """Ends a whole test file as skipped (ctest: SKIP_RETURN_CODE 77)."""
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP)


def require_binaries():
    """Exits 1 when a binary is missing (a build without them is a failure, not a reason to
    skip), and copies them where every user may run them when they are not there already."""
    for path in (COLO, COLOD, SHIM):
        if not os.access(path, os.X_OK):
            print(f"missing binary {path} (build colo, colod and colo-shim)", file=sys.stderr)
            sys.exit(1)
    if is_root() and not reachable_by_everyone(BIN_DIR):
        copy_binaries_for_everyone()


def reachable_by_everyone(directory):
    """Whether every user may run the binaries in `directory` (jobs run colo-shim as their
    user): each directory on the way searchable by others, each binary executable by them."""
    path = os.path.abspath(directory)
    while True:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in (COLO, COLOD, SHIM))


def copy_binaries_for_everyone():
    """A build in a private directory (a checkout under /root): the binaries are copied where
    every test user may run them, for this process, and removed at its exit."""
    global BIN_DIR, COLO, COLOD, SHIM
    copy = tempfile.mkdtemp(prefix="colo-e2e-bin-")
    os.chmod(copy, 0o755)
    atexit.register(shutil.rmtree, copy, True)
    for name in ("colo", "colod", "colo-shim"):
        shutil.copy2(os.path.join(BIN_DIR, name), os.path.join(copy, name))
        os.chmod(os.path.join(copy, name), 0o755)
    BIN_DIR = copy
    COLO, COLOD, SHIM = (os.path.join(copy, n) for n in ("colo", "colod", "colo-shim"))


def is_root():
    return os.geteuid() == 0


def wait_until(predicate, deadline, what, interval=0.05):
    """Polls `predicate` until it returns a true value, which is returned; fails at the deadline
    (longer for sanitized binaries)."""
    deadline *= SLOWER
    end = time.monotonic() + deadline
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {deadline} s waiting for {what}")
        time.sleep(interval)


# --- Users ---


class User:
    """A local user as the passwd and group databases describe it."""

    def __init__(self, name):
        pw = pwd.getpwnam(name)
        self.name = pw.pw_name
        self.uid = pw.pw_uid
        self.gid = pw.pw_gid
        self.home = pw.pw_dir
        groups = os.getgrouplist(self.name, self.gid)
        self.groups = sorted(set(groups))

    def __repr__(self):
        return f"User({self.name}, uid={self.uid})"


def current_user():
    return User(pwd.getpwuid(os.geteuid()).pw_name)


def user_or_none(name):
    try:
        return User(name)
    except KeyError:
        return None


def unprivileged_user():
    """A user without privileges to run personal daemons as: the caller when not root, else
    colo-alice (as CI makes it), else nobody."""
    if not is_root():
        return current_user()
    return user_or_none("colo-alice") or User("nobody")


def as_user(user, argv, gid=None, clear_groups=False):
    """`argv` run as `user` (its groups from the group database) when that is not the caller.
    `gid` and `clear_groups` make a caller whose gid the database does not give the user."""
    if user is None or (user.uid == os.geteuid() and gid is None):
        return list(argv)
    prefix = ["setpriv", "--reuid", str(user.uid), "--regid", str(user.gid if gid is None else gid)]
    prefix += ["--clear-groups"] if clear_groups else ["--init-groups"]
    return prefix + ["--"] + list(argv)


def error_message(result):
    """What a failed `colo` said: with --json the error object's message on stdout, else
    stderr."""
    try:
        return json.loads(result.stdout)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return result.stderr


def chown_tree(path, user):
    """Gives `path` and everything below it to `user` (root only; a no-op for the caller)."""
    if user is None or not is_root() or user.uid == os.geteuid():
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, user.uid, user.gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), user.uid, user.gid)


# --- Processes left by a test ---


def processes_with_token(*tokens):
    """Pids of every process whose environment carries every one of `tokens` (jobs and their
    shims)."""
    needles = [t.encode() for t in tokens]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
                if all(n in environ for n in needles):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def kill_processes_with_token(token):
    """SIGKILLs every process carrying `token` until none is left (bounded)."""
    end = time.monotonic() + 10
    while time.monotonic() < end:
        pids = processes_with_token(token)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def remove_cgroup(path):
    """Removes an attempt's cgroup its colod left behind (it is empty once its processes are
    gone; emptying may lag behind a moment)."""
    end = time.monotonic() + 5
    while os.path.isdir(path):
        try:
            os.rmdir(path)
        except OSError:
            if time.monotonic() > end:
                return
            time.sleep(0.05)


# --- Raw sockets ---


def free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, deadline=10):
    """A GET on 127.0.0.1:PORT; (status line, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=deadline) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.decode().partition("\r\n\r\n")
    return head.splitlines()[0], body


def connect_as(path, user=None, count=1, timeout=5.0):
    """`count` connections to the Unix socket `path`, made by a child process that became `user`
    first, so that colod's SO_PEERCRED sees that user. Returns the sockets, or raises OSError
    with the child's error."""
    if user is None or user.uid == os.geteuid():
        socks = []
        try:
            for _ in range(count):
                socks.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
                socks[-1].settimeout(timeout)
                socks[-1].connect(path)
        except BaseException:
            for s in socks:
                s.close()
            raise
        return socks
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the child: only system calls from here on
        code = 1
        try:
            parent.close()
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            socks = []  # kept: a socket object that is collected closes its descriptor
            for _ in range(count):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                socks.append(s)
            fds = [s.fileno() for s in socks]
            for start in range(0, len(fds), 200):
                socket.send_fds(child, [b"x"], fds[start:start + 200])
            code = 0
        except OSError as e:
            try:
                child.sendall(f"E{e.errno}".encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    child.close()
    socks = []
    try:
        parent.settimeout(timeout)
        while len(socks) < count:
            data, fds, _, _ = socket.recv_fds(parent, 64, 200)
            if not fds:
                err = data.decode(errors="replace")
                if err.startswith("E"):
                    raise OSError(int(err[1:] or 0), f"connect as {user.name} to {path} failed")
                raise OSError(0, f"connect as {user.name}: no descriptor came back")
            for fd in fds:
                s = socket.socket(fileno=fd)
                s.settimeout(timeout)
                socks.append(s)
    except BaseException:
        for s in socks:
            s.close()
        raise
    finally:
        parent.close()
        os.waitpid(pid, 0)
    return socks


def read_line(sock, deadline=10.0, limit=1 << 24):
    """One reply line from `sock` (without the newline); b"" if colod closed the connection."""
    deadline *= SLOWER
    data = b""
    end = time.monotonic() + deadline
    while b"\n" not in data:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no reply line within {deadline} s (got {data[:200]!r})")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return data
        if not chunk:
            return data
        data += chunk
        if len(data) > limit:
            raise AssertionError("reply line too long")
    return data.split(b"\n", 1)[0]


def read_lines(sock, count, deadline=30.0):
    """`count` reply lines from `sock` (fewer if colod closed it)."""
    deadline *= SLOWER
    data = b""
    end = time.monotonic() + deadline
    while data.count(b"\n") < count:
        left = end - time.monotonic()
        if left <= 0:
            got = data.count(b"\n")
            raise AssertionError(f"{got} of {count} lines within {deadline} s")
        sock.settimeout(left)
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n")[:count]


def request(sock, obj, deadline=10.0):
    """Sends one request (a dict, or raw bytes) and returns the decoded reply, or None when
    colod closed the connection."""
    line = obj if isinstance(obj, bytes) else json.dumps(obj).encode() + b"\n"
    try:
        sock.sendall(line)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused at once: the refusal may still be there to read
    reply = read_line(sock, deadline)
    return json.loads(reply) if reply else None


# --- colod ---


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, dict):  # an inline table
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


DEFAULT_CONFIG = {
    "scheduler": {"sample_interval": "0.2s", "launch_grace": "0s", "window": 5},
    "jobs": {"cancel_grace": "1s", "leftover_grace": "1s"},
}


def write_config(path, overrides=None):
    """A colod TOML config: DEFAULT_CONFIG with `overrides` ({table: {key: value}}) on top."""
    tables = {t: dict(v) for t, v in DEFAULT_CONFIG.items()}
    for table, values in (overrides or {}).items():
        tables.setdefault(table, {}).update(values)
    with open(path, "w") as f:
        for table, values in tables.items():
            f.write(f"[{table}]\n")
            for key, value in values.items():
                f.write(f"{key} = {toml_value(value)}\n")
            f.write("\n")
    return path


class Colod:
    """One colod process: started in `root` (state/, colod.sock, colod.toml there unless given),
    as `user` (None: the caller), with fake GPUs."""

    def __init__(self, root, user=None, fake_gpus=2, config=None, state_dir=None, socket_path=None,
                 use_config=True, extra_args=(), env=None, defaults=False):
        self.root = root
        self.user = user
        self.fake_gpus = fake_gpus
        self.defaults = defaults  # no --state-dir/--socket: colod's own defaults
        self.state_dir = state_dir or os.path.join(root, "state")
        self.socket = socket_path or os.path.join(root, "colod.sock")
        self.config_path = None
        if use_config:
            self.config_path = write_config(os.path.join(root, "colod.toml"), config)
        self.extra_args = list(extra_args)
        self.env = env
        self.log_path = os.path.join(root, f"colod-{uuid.uuid4().hex[:6]}.log")
        self.proc = None
        self.logs = []

    def argv(self):
        argv = [COLOD]
        if self.fake_gpus:
            argv += ["--fake-gpus", str(self.fake_gpus)]
        if self.config_path:
            argv += ["--config", self.config_path]
        if not self.defaults:
            argv += ["--state-dir", self.state_dir, "--socket", self.socket]
        return argv + self.extra_args

    def spawn(self):
        """Starts colod without waiting for it to serve."""
        self.log_path = os.path.join(self.root, f"colod-{len(self.logs)}.log")
        self.logs.append(self.log_path)
        log = open(self.log_path, "wb")
        env = dict(self.env if self.env is not None else {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"})
        env.update(SANITIZER_ENV)
        self.proc = subprocess.Popen(as_user(self.user, self.argv()), stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        log.close()
        return self.proc

    def start(self):
        """Starts colod and waits until it answers hello on its socket."""
        self.spawn()
        self.wait_serving()
        return self

    def wait_serving(self, deadline=20):
        def serving():
            if self.proc.poll() is not None:
                raise AssertionError(f"colod exited with {self.proc.returncode}:\n{self.log()}")
            if not os.path.exists(self.socket):
                return False
            try:
                s = connect_as(self.socket, self.user, timeout=2)[0]
            except OSError:
                return False
            with s:
                try:
                    reply = request(s, {"api": 1, "op": "hello"}, deadline=5)
                except (OSError, AssertionError):
                    return False
            return bool(reply and reply.get("ok"))

        wait_until(serving, deadline, "colod to serve its socket")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        """Everything every colod of this object wrote, oldest first."""
        text = []
        for path in self.logs:
            try:
                with open(path, "rb") as f:
                    text.append(f.read().decode(errors="replace"))
            except OSError:
                pass
        return "".join(text)

    def current_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, deadline=15):
        """SIGTERM, then SIGKILL at the deadline; returns the exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(deadline * SLOWER)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"colod did not stop within {deadline} s of SIGTERM")

    def kill9(self):
        """kill -9 colod (its jobs keep running) and reaps it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def cgroups(self):
        """The attempt cgroups this colod made (from the tracking line of its logs)."""
        found = set()
        for match in re.finditer(r"each attempt in (/\S+)/(colo-\S*?)<job>-<attempt>", self.log()):
            base, prefix = match.groups()
            try:
                names = os.listdir(base)
            except OSError:
                continue
            found.update(os.path.join(base, n) for n in names if n.startswith(prefix))
        return sorted(found)

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


# --- The test base ---


class E2ETest(unittest.TestCase):
    """A test with a temporary directory, its colods and jobs, all cleaned up after it."""

    # The user running clients by default (None: the caller).
    client_user = None

    def setUp(self):
        self.token = f"COLO_E2E_TOKEN={uuid.uuid4().hex}"
        self.tmp = tempfile.mkdtemp(prefix="colo-e2e-")
        os.chmod(self.tmp, 0o755)
        self.daemons = []
        self.mounts = []
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        outcome = getattr(self, "_outcome", None)
        if outcome is not None and not getattr(outcome, "success", True):
            for d in self.daemons:  # what colod said, for the failure's report
                print(f"--- colod log ({' '.join(d.argv())}):\n{d.log()}", file=sys.stderr)
        for d in self.daemons:
            d.cleanup()
        kill_processes_with_token(self.token.split("=", 1)[1])
        for d in self.daemons:
            for path in d.cgroups():
                remove_cgroup(path)
        self.cleanup_extra()
        for path in reversed(self.mounts):
            subprocess.run(["umount", "-l", path], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cleanup_extra(self):
        """Subclasses: what must go before the temporary directory."""

    def mount_tmpfs(self, name, size):
        """A tmpfs of `size` ("8m") at TMP/NAME, unmounted at the end (root only: skipped
        otherwise)."""
        if not is_root():
            self.skipTest("mounting a file system needs root")
        path = self.mkdir(name)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs here: {r.stderr.strip()}")
        self.mounts.append(path)
        return path

    def mkdir(self, *parts, user=None, mode=0o755):
        path = os.path.join(self.tmp, *parts)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
        chown_tree(path, user)
        return path

    def write(self, path, text, mode=0o644, user=None):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        if user is not None and is_root():
            os.chown(path, user.uid, user.gid)
        return path

    def colod(self, start=True, **kwargs):
        d = Colod(self.tmp, **kwargs)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    # --- Clients ---

    def client_env(self, user=None, socket_path=None, extra=None, path_prefix=None):
        """The environment `colo` (and so the job) gets: PATH, HOME and the test's token."""
        user = user or self.client_user or current_user()
        env = {
            "PATH": (path_prefix + ":" if path_prefix else "") + SYSTEM_PATH,
            "HOME": user.home,
            "USER": user.name,
            "LOGNAME": user.name,
            "LANG": "C.UTF-8",
            self.token.split("=", 1)[0]: self.token.split("=", 1)[1],
        }
        if socket_path:
            env["COLO_SOCKET"] = socket_path
        env.update(SANITIZER_ENV)
        env.update(extra or {})
        return env

    def colo(self, *args, daemon=None, user=None, env=None, cwd=None, timeout=CLIENT_DEADLINE,
             input=None, gid=None, clear_groups=False, path_prefix=None, extra_env=None):
        """Runs `colo ARGS` as `user` against `daemon` (its socket through COLO_SOCKET) and
        returns the CompletedProcess (text). Whatever it is asked, colo must never die of a
        signal or exit with a code of 128 or more."""
        user = user or self.client_user
        if env is None:
            env = self.client_env(user, daemon.socket if daemon else None, extra_env,
                                  path_prefix)
        argv = as_user(user, [COLO] + [str(a) for a in args], gid=gid, clear_groups=clear_groups)
        result = subprocess.run(argv, env=env, cwd=cwd or self.tmp, input=input,
                                capture_output=True, text=True, errors="replace", timeout=timeout)
        self.assertTrue(0 <= result.returncode < 128,
                        f"colo {' '.join(map(str, args))} crashed with status "
                        f"{result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def colo_ok(self, *args, **kwargs):
        result = self.colo(*args, **kwargs)
        self.assertEqual(result.returncode, 0,
                         f"colo {' '.join(map(str, args))} failed:\n{result.stdout}\n"
                         f"{result.stderr}")
        return result

    def colo_json(self, command, *args, **kwargs):
        """`colo COMMAND --json ARGS`: must succeed and print one JSON object."""
        args = (command, "--json") + args
        result = self.colo_ok(*args, **kwargs)
        try:
            return json.loads(result.stdout)
        except ValueError as e:
            self.fail(f"colo {' '.join(map(str, args))} --json printed no JSON ({e}):\n"
                      f"{result.stdout!r}")

    def submit(self, *args, **kwargs):
        """`colo submit ARGS`: the new job's id."""
        reply = self.colo_json("submit", *args, **kwargs)
        self.assertTrue(reply.get("ok"), reply)
        return int(reply["job"])

    def show(self, job, **kwargs):
        return self.colo_json("show", job, **kwargs)["job"]

    def wait_state(self, job, states, deadline=JOB_DEADLINE, **kwargs):
        """Polls `colo show JOB --json` until the job is in one of `states`; its detail."""
        states = {states} if isinstance(states, str) else set(states)
        last = {}

        def reached():
            last["job"] = self.show(job, **kwargs)
            return last["job"] if last["job"]["state"] in states else None

        try:
            return wait_until(reached, deadline, f"job {job} to be {sorted(states)}", 0.1)
        except AssertionError as e:
            raise AssertionError(f"{e}; last seen: {json.dumps(last.get('job'))[:2000]}")

    def assert_succeeded(self, job, **kwargs):
        detail = self.wait_state(job, {"succeeded", "failed", "cancelled", "lost"}, **kwargs)
        self.assertEqual(detail["state"], "succeeded", json.dumps(detail)[:3000])
        return detail


class OneColodTest(E2ETest):
    """A test of one colod, `self.daemon`, whose clients run in `self.work` with `self.bin` (the
    test's job programs) first on their PATH; setUp makes all three. A call that names another
    daemon, directory or PATH prefix gets that one."""

    def colo(self, *args, **kwargs):
        kwargs.setdefault("cwd", self.work)
        kwargs.setdefault("path_prefix", self.bin)
        kwargs.setdefault("daemon", self.daemon)
        return super().colo(*args, **kwargs)


def main():
    require_binaries()
    unittest.main(verbosity=2)


class ReplyDroppingProxy:
    """A Unix socket in front of colod's that passes requests and replies through, but loses the
    replies to the first `drop` submits: the submit reaches colod, the client never hears back
    (the connection closes), as when a reply is lost. colod sees the proxy's credentials (the
    test's own user). Served by a thread until close()."""

    def __init__(self, target, path, drop=1):
        self.target, self.path, self.drop = target, path, drop
        self.dropped = 0
        self.submits = 0
        self.ops = collections.Counter()  # the requests passed on, by op
        self.lock = threading.Lock()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        os.chmod(path, 0o777)
        self.listener.listen(16)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn):
        with conn, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
            try:
                upstream.connect(self.target)
                buffered = b""
                while True:
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        return
                    buffered += chunk
                    while b"\n" in buffered:
                        line, buffered = buffered.split(b"\n", 1)
                        upstream.sendall(line + b"\n")
                        reply = read_line(upstream, deadline=60)
                        with self.lock:
                            op = json.loads(line).get("op")
                            self.ops[op] += 1
                            is_submit = op == "submit"
                            self.submits += is_submit
                            lose = is_submit and self.dropped < self.drop
                            self.dropped += lose
                        if lose:
                            return  # the reply is lost: the client's connection just closes
                        conn.sendall(reply + b"\n")
            except (OSError, ValueError, AssertionError):
                return

    def close(self):
        self.listener.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
