"""colo's API from Python: submit, status, wait, logs, cancel and the queue, for notebooks and
pipelines. Pure standard library; it speaks colod's typed API (one JSON object per line on colod's
Unix socket, src/api/types.h) as `colo` does, so colod knows the caller by the socket's peer
credentials, never by anything the client says.

    import colo
    c = colo.Client()                       # $COLO_SOCKET, a personal colod's, then the system's
    job = c.submit(["python", "train.py"], memory="12GiB")
    job = c.submit(["python", "train.py"], estimate_from="model.json")   # colo.profile's output
    print(c.wait(job).state, c.logs(job))
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import resource
import shutil
import signal as signal_module
import socket
import stat
import subprocess
import time
import uuid
from typing import Iterable, Mapping, Sequence

API_VERSION = 1
SYSTEM_SOCKET = "/run/colo/colod.sock"
# A reply larger than this is not colod's (its largest, a page of history, is far smaller).
MAX_REPLY_BYTES = 64 << 20
MAX_SIGNAL_LEAD_S = 65535  # as Slurm's --signal
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "lost", "requeued", "timeout"})


# --- Errors: one class per API error code -------------------------------------------------------


class ColoError(Exception):
    """colod refused a request, or could not be reached. `code` is the API's error code (the
    `code` field of the reply: invalid_argument, not_found, ...), or "unreachable"."""

    code = "internal"

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(ColoError):
    code = "invalid_argument"


class NotFound(ColoError):
    code = "not_found"


class PermissionDenied(ColoError):
    code = "permission_denied"


class Infeasible(ColoError):
    code = "infeasible"


class FailedPrecondition(ColoError):
    code = "failed_precondition"


class Unavailable(ColoError):
    code = "unavailable"


class Busy(ColoError):
    code = "busy"


class TooLarge(ColoError):
    code = "too_large"


class Unreachable(ColoError):
    """No colod answered at the socket."""

    code = "unreachable"


class Unanswered(Unavailable):
    """The request was sent but no answer came (the connection broke, colod restarted): it may
    or may not have been served."""


_ERRORS = {cls.code: cls for cls in (InvalidArgument, NotFound, PermissionDenied, Infeasible,
                                     FailedPrecondition, Unavailable, Busy, TooLarge, Unreachable)}


def _error(code, message):
    cls = _ERRORS.get(code, ColoError)
    return cls(message, code) if cls is ColoError else cls(message)


# --- Typed results ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Attempt:
    number: int
    gpu_uuids: tuple
    mode: str
    started: float
    ended: float
    exit_kind: str  # "" while it runs; success, failure, out-of-memory, cancelled, lost
    detail: str
    peak_bytes: int

    @classmethod
    def from_json(cls, j):
        return cls(number=j.get("number", 0), gpu_uuids=tuple(j.get("gpu_uuids", ())),
                   mode=j.get("mode", ""), started=j.get("started", 0.0),
                   ended=j.get("ended", 0.0), exit_kind=j.get("exit_kind", ""),
                   detail=j.get("detail", ""), peak_bytes=j.get("peak", 0))


@dataclasses.dataclass(frozen=True)
class Job:
    """A job as colod reports it. Sizes are bytes; times seconds since the epoch (0: not yet).
    `attempt_list`, `command`, `estimate` and `events` are filled by `show` (status), not by
    `queue` or `history`."""

    id: int
    name: str
    user: str
    state: str
    gpus: int
    memory_bytes: int | None
    peak_bytes: int
    attempts: int
    submitted: float
    started: float
    finished: float
    reason: str
    gpu_uuids: tuple
    redacted: bool = False
    command: tuple = ()
    workdir: str = ""
    estimate: Mapping | None = None
    attempt_list: tuple = ()
    events: tuple = ()

    @property
    def done(self):
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self):
        return self.state == "succeeded"

    @classmethod
    def from_json(cls, j):
        return cls(id=j["id"], name=j.get("name", ""), user=j.get("user", ""),
                   state=j.get("state", ""), gpus=j.get("gpus", 1),
                   memory_bytes=j.get("memory"), peak_bytes=j.get("peak", 0),
                   attempts=j.get("attempts", 0), submitted=j.get("submitted", 0.0),
                   started=j.get("started", 0.0), finished=j.get("finished", 0.0),
                   reason=j.get("reason", ""), gpu_uuids=tuple(j.get("gpu_uuids", ())),
                   redacted=bool(j.get("redacted", False)), command=tuple(j.get("command", ())),
                   workdir=j.get("workdir", ""), estimate=j.get("estimate"),
                   attempt_list=tuple(Attempt.from_json(a) for a in j.get("attempt_list", ())),
                   events=tuple((e.get("time", 0.0), e.get("kind", ""), e.get("detail", ""))
                                for e in j.get("events", ())))


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    memory_total_bytes: int
    memory_used_bytes: int
    smact: float | None  # None where the GPU cannot say
    jobs: tuple  # job ids on it

    @classmethod
    def from_json(cls, j):
        smact = j.get("smact")
        return cls(index=j.get("index", 0), uuid=j.get("uuid", ""), name=j.get("name", ""),
                   memory_total_bytes=j.get("memory_total", 0),
                   memory_used_bytes=j.get("memory_used", 0),
                   smact=smact if isinstance(smact, (int, float)) and smact >= 0 else None,
                   jobs=tuple(job.get("id") for job in j.get("jobs", ())))


# --- Sizes --------------------------------------------------------------------------------------

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3,
          "gb": 1000**3, "t": 1000**4, "tb": 1000**4, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30, "tib": 1 << 40}


def parse_bytes(size):
    """12GiB, 500MiB, 1.5GB or an int of bytes -> bytes."""
    if isinstance(size, int) and not isinstance(size, bool):
        if size <= 0:
            raise InvalidArgument(f"a size must be more than 0, not {size}")
        return size
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(size))
    if not match or match.group(2).lower() not in _UNITS:
        raise InvalidArgument(f"not a size: {size!r} (e.g. 12GiB, 500MiB)")
    value = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if value <= 0:
        raise InvalidArgument(f"a size must be more than 0, not {size!r}")
    return value


# --- The client ---------------------------------------------------------------------------------


def default_socket():
    """Where `colo` looks: $COLO_SOCKET, then a personal colod of this user, then the system's."""
    explicit = os.environ.get("COLO_SOCKET")
    if explicit:
        return explicit
    if os.geteuid() != 0:
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        personal = (os.path.join(runtime, "colo", "colod.sock") if runtime.startswith("/")
                    else f"/tmp/colo-{os.geteuid()}/colod.sock")
        try:
            st = os.stat(personal)
            if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid():
                return personal
        except OSError:
            pass
    return SYSTEM_SOCKET


class Client:
    """One colod. Every call opens its own connection (colod bounds them per user), so a Client
    can be shared between threads."""

    def __init__(self, socket_path=None, timeout=30.0, colo_binary=None):
        self.socket_path = socket_path or default_socket()
        self.timeout = timeout
        self.colo_binary = colo_binary or shutil.which("colo") or "colo"

    # The wire.
    def call(self, op, **fields):
        """Sends one request and returns the reply's fields; raises the reply's error."""
        request = dict(fields, api=API_VERSION, op=op)
        line = (json.dumps(request, separators=(",", ":")) + "\n").encode()
        sent = False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(self.timeout)
                conn.connect(self.socket_path)
                sent = True
                conn.sendall(line)
                reply = self._read_line(conn)
        except socket.timeout as error:
            raise Unanswered(f"colod at {self.socket_path} did not answer within "
                             f"{self.timeout} s") from error
        except OSError as error:
            if sent:
                raise Unanswered(f"colod at {self.socket_path} gave no answer: {error}") from error
            raise Unreachable(f"cannot reach colod at {self.socket_path}: {error} (is colod "
                              "running? set COLO_SOCKET)") from error
        try:
            answer = json.loads(reply)
        except ValueError as error:
            raise ColoError(f"colod sent something that is not JSON: {error}") from error
        if not isinstance(answer, dict):
            raise ColoError("colod's reply is not a JSON object")
        if not answer.get("ok"):
            raise _error(answer.get("code", "internal"), answer.get("error", "failed"))
        return answer

    @staticmethod
    def _read_line(conn):
        chunks, size = [], 0
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                raise OSError("colod closed the connection before replying")
            newline = chunk.find(b"\n")
            if newline >= 0:
                chunks.append(chunk[:newline])
                return b"".join(chunks).decode("utf-8", "replace")
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise TooLarge(f"colod's reply is larger than {MAX_REPLY_BYTES} bytes")

    # Jobs.
    def submit(self, command: Sequence[str], *, gpus=1, memory=None, share=None, threads=None,
               smact=None, name="", workdir=None, env: Mapping[str, str] | None = None,
               estimate_from=None, batch=None, gpu_model=None, output=None, error=None,
               requeue=False, signal=None, token=None, patience=60.0) -> int:
        """Submits `command` (argv; the first word is found through PATH) and returns the job id.
        `memory`: the declared peak per GPU (bytes or "12GiB"); `estimate_from`: a profile
        (colo.profile's or colo-profile's JSON, or a torchsummary file) that colo's estimators turn
        into the plan, as `colo submit --estimate-from` does; `env` defaults to this process's;
        `output`/`error`: files for the job's stdout/stderr as `colo submit -o/-e` takes them.
        `requeue`: preemptible (`colo submit --requeue`); `signal`: what it gets before it is
        stopped, "[B:]SIG[@SECONDS]" as `--signal` takes it (default "TERM@60").
        The submit carries a token (`token`, else a new random one): should its answer be lost
        (the connection broke, colod restarted), it is sent again for up to `patience` seconds,
        and colod answers with the job it stored the first time, never a second one."""
        if isinstance(command, str) or not command or not all(isinstance(w, str) for w in command):
            raise InvalidArgument("command must be a non-empty list of strings (argv)")
        request = {"command": list(command), "gpus": int(gpus),
                   "workdir": os.path.abspath(workdir or os.getcwd()),
                   "env": [f"{k}={v}" for k, v in (os.environ if env is None else env).items()],
                   "share": share or "any", "source": "python"}
        _check_runnable(command[0], request["workdir"], request["env"])
        if memory is not None:
            request["memory"] = parse_bytes(memory)
        if threads is not None:
            request["threads"] = int(threads)
        if smact is not None:
            request["expected_smact"] = float(smact)
        if name:
            request["name"] = name
        if output:
            request["output"] = output
        if error:
            request["error"] = error
        if requeue:
            request["requeue"] = True
        if signal is not None:
            request["signal"] = parse_signal(signal)
        if estimate_from is not None:
            request["estimate"] = self.estimate(estimate_from, batch=batch, gpu_model=gpu_model)
        request.update(submitter_context())
        request["token"] = token or uuid.uuid4().hex
        give_up = time.monotonic() + patience
        pause, first, unanswered = 0.1, True, 0
        while True:
            try:
                return int(self.call("submit", **request)["job"])
            except Unreachable:
                # At the first try colod is not there and nothing was sent: no retry.
                if first or time.monotonic() + pause > give_up:
                    raise
            except Unanswered:
                # A restarting colod refuses connections, then answers: one that takes the
                # submit three times without answering is not restarting.
                unanswered += 1
                if unanswered >= 3 or time.monotonic() + pause > give_up:
                    raise
            first = False
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def estimate(self, summary, batch=None, gpu_model=None):
        """The estimate colo plans with for a profile, in the API's form (as `colo submit
        --estimate-from` sends it): colo's estimators are C++, run through `colo estimate`."""
        argv = [self.colo_binary, "estimate", os.fspath(summary), "--json"]
        if batch:
            argv += ["--batch", str(int(batch))]
        if gpu_model:
            argv += ["--gpu", gpu_model]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except OSError as error:
            raise InvalidArgument(f"cannot run {argv[0]}: {error}") from error
        if done.returncode != 0:
            raise InvalidArgument(done.stderr.strip() or f"colo estimate failed ({done.returncode})")
        try:
            report = json.loads(done.stdout)
            estimates = report["estimates"]
        except (ValueError, KeyError, TypeError) as error:
            raise ColoError(f"colo estimate printed no report: {error}") from error
        best = next((e for e in estimates if e.get("estimator") == report.get("best")),
                    None)
        if best is None:
            reasons = "; ".join(f"{e['estimator']}: {e.get('error', '')}" for e in estimates)
            raise InvalidArgument(f"no estimator could answer for {summary}: {reasons}")
        estimate = {key: best[key] for key in ("peak", "lower", "upper", "detail")}
        estimate["estimator"] = best["estimator"]
        estimate["signature"] = f"{report['signature']}-b{report['batch']}"
        predicted = report.get("solo_smact", {}).get("predicted")
        if predicted is not None:
            estimate["predicted_smact"] = predicted
        return estimate

    def status(self, job) -> Job:
        """Everything about one of your jobs (`colo show`)."""
        return Job.from_json(self.call("show", job=int(job))["job"])

    def queue(self, user="") -> list:
        """Jobs waiting and running (`colo queue`); `user` restricts it to one user's. colod
        answers a page at a time (each page a request of its own); this follows every page."""
        jobs, after = [], None
        while True:
            fields = {"user": user}
            if after is not None:
                fields["after"] = after
            reply = self.call("queue", **fields)
            jobs.extend(Job.from_json(j) for j in reply["jobs"])
            after = reply.get("next")
            if after is None:
                return jobs

    def history(self, limit=50, all_users=False) -> list:
        """Jobs that ended, newest first (`colo history`), following pages up to `limit`."""
        jobs, before = [], None
        while len(jobs) < limit:
            fields = {"limit": min(200, limit - len(jobs)), "all": bool(all_users)}
            if before is not None:
                fields["before"] = before
            reply = self.call("history", **fields)
            jobs += [Job.from_json(j) for j in reply["jobs"]]
            before = reply.get("next")
            if before is None or not reply["jobs"]:
                break
        return jobs

    def cancel(self, *jobs: int) -> None:
        """Cancels each job (your own; root may cancel any)."""
        for job in jobs:
            self.call("cancel", job=int(job))

    def wait(self, job, timeout=None, poll=0.5) -> Job:
        """Returns the job once it has ended; raises TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(poll, 0.1)
        while True:
            current = self.status(job)
            if current.done:
                return current
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job} is still {current.state} after {timeout} s")
            time.sleep(delay)
            delay = min(poll, delay * 2)  # quick for short jobs, gentle on colod for long ones

    def logs(self, job, stderr=False, max_bytes=16 << 20) -> str:
        """What the job's latest attempt wrote to stdout (or stderr), its last `max_bytes` at
        most; "" before it started. The file is the job owner's: it is read as this process,
        never following a link, and never more than `max_bytes` of it."""
        reply = self.call("logs", job=int(job))
        path = reply.get("stderr" if stderr else "stdout", "")
        if not path:
            return ""
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise PermissionDenied(f"{path} is not a regular file")
            size = os.fstat(fd).st_size
            if size > max_bytes:
                os.lseek(fd, size - max_bytes, os.SEEK_SET)
            with os.fdopen(fd, "rb", closefd=False) as f:
                return f.read(max_bytes).decode("utf-8", "replace")
        finally:
            os.close(fd)

    def gpus(self) -> list:
        """Every GPU colod manages, with its memory, SM activity and jobs (`colo gpus`)."""
        return [Gpu.from_json(g) for g in self.call("gpus")["gpus"]]

    def hello(self) -> Mapping:
        """colod's name, API version, GPU backend and who it thinks the caller is."""
        return self.call("hello")


# The resource limits a job takes from its submitter, by the names colod knows them by.
_LIMITS = {name: getattr(resource, f"RLIMIT_{name.upper()}") for name in
           ("as", "core", "cpu", "data", "fsize", "memlock", "nofile", "nproc", "rss", "stack")
           if hasattr(resource, f"RLIMIT_{name.upper()}")}


def _ascii_number(text):
    """The number that 0-9 alone spell, as colod reads one; None for "+5", " 5", "1_0", another
    script's digits, or more than a 64-bit number holds (Python would refuse past 4300 digits)."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else None


def parse_signal(text):
    """sbatch's --signal, "[B:]SIG[@SECONDS]" (SIG a name such as USR1 or a number), in the API's
    form; colod names the signals it sends if this one is not among them."""
    rest = text[2:] if text.startswith("B:") else text
    name, at, lead = rest.partition("@")
    seconds = _ascii_number(lead) if at else 60
    if seconds is None or seconds > MAX_SIGNAL_LEAD_S:
        raise InvalidArgument(f"signal: {lead!r} is not a number of seconds "
                              f"0..{MAX_SIGNAL_LEAD_S} after @")
    number = _ascii_number(name)
    if number is None:
        try:
            number = int(signal_module.Signals["SIG" + name.upper().removeprefix("SIG")])
        except KeyError:
            raise InvalidArgument(f"signal: {text!r} is not [B:]SIG[@SECONDS]") from None
    return {"number": number, "lead_s": seconds}


def submitter_context():
    """What a job takes from this process, as `colo submit` sends it: the umask its files are
    made with and the resource limits its processes get (colod never gives more than its own)."""
    mask = None
    try:  # read, not set and set back: other threads may be making files meanwhile
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    mask = int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    if mask is None:
        mask = os.umask(0)
        os.umask(mask)
    limits = []
    for name, which in _LIMITS.items():
        soft, hard = resource.getrlimit(which)
        limits.append({"name": name,
                       "soft": -1 if soft == resource.RLIM_INFINITY else soft,
                       "hard": -1 if hard == resource.RLIM_INFINITY else hard})
    return {"umask": mask, "limits": limits}


def _check_runnable(program, workdir, env):
    """Refuses a job whose first word cannot start, as `colo submit` does, here where the caller's
    files are: a path (from `workdir`) must be a file the caller may run, and a bare name must be
    on the PATH the job gets (execvp's /bin:/usr/bin when it gets none)."""
    if "/" in program:
        path = os.path.join(workdir, program)
        if not os.path.exists(path):
            raise InvalidArgument(f"cannot run {program}: no such file (in {workdir})")
        if os.path.isdir(path):
            raise InvalidArgument(f"cannot run {program}: it is a directory")
        if not os.access(path, os.X_OK):
            raise InvalidArgument(f"cannot run {program}: it is not executable")
        return
    search = next((e[len("PATH="):] for e in env if e.startswith("PATH=")), "/bin:/usr/bin")
    for entry in search.split(":"):
        candidate = os.path.join(workdir, entry, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return
    raise InvalidArgument(f"cannot run {program}: no file of that name in {workdir}, and no "
                          "command of that name on the job's PATH")


def submit_many(client: Client, commands: Iterable[Sequence[str]], **options) -> list:
    """Submits each command with the same options; the job ids in order."""
    return [client.submit(command, **options) for command in commands]
