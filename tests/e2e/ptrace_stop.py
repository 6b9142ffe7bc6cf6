"""Stops a child of colod at the first moment its user may signal it, as a hostile user would
try to: colod is traced (root only) until it forks a child whose real uid becomes `uid` (the
start of that user's job, right after its setuid), which is then left stopped (SIGSTOP) and
untraced, as is colod. Deterministic where polling /proc for the moment would be a race.
"""

import ctypes
import os
import signal
import time

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long

PTRACE_CONT = 7
PTRACE_DETACH = 17
PTRACE_SYSCALL = 24
PTRACE_GETEVENTMSG = 0x4201
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_O_TRACESYSGOOD = 0x1
PTRACE_O_TRACEFORK = 0x2
PTRACE_EVENT_FORK = 1
WALL = 0x40000000


def _ptrace(request, pid, addr=0, data=0):
    result = _libc.ptrace(request, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    if result == -1:
        error = ctypes.get_errno()
        raise OSError(error, f"ptrace({request:#x}, {pid}): {os.strerror(error)}")
    return result


def real_uid(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _wait(pid, deadline):
    """The next status of `pid` (-1: any tracee): (pid, status), or None at the deadline."""
    while time.monotonic() < deadline:
        try:
            got, status = os.waitpid(pid, os.WNOHANG | WALL)
        except ChildProcessError:
            return None
        if got:
            return got, status
        time.sleep(0.0005)
    return None


def _resume(request, pid, status):
    """Resumes a stopped tracee, passing on a signal that stopped it (not a trace event)."""
    sig = os.WSTOPSIG(status)
    event = status >> 16
    deliver = 0 if event or sig in (signal.SIGTRAP, signal.SIGTRAP | 0x80) else sig
    try:
        _ptrace(request, pid, 0, deliver)
    except OSError:
        pass  # it went away meanwhile


def _let_go(pid, deadline):
    """Detaches a tracee that may be running: interrupted first, as detaching needs a stop."""
    try:
        _ptrace(PTRACE_INTERRUPT, pid)
    except OSError:
        return
    while True:
        got = _wait(pid, deadline)
        if got is None or os.WIFEXITED(got[1]) or os.WIFSIGNALED(got[1]):
            return
        if os.WIFSTOPPED(got[1]):
            break
    try:
        _ptrace(PTRACE_DETACH, pid, 0, 0)
    except OSError:
        pass


def stop_child_when_user(colod_pid, uid, trigger, timeout=30.0):
    """Traces colod, runs `trigger()` (which makes colod start a job of `uid`), and returns the
    pid of the child left stopped once its real uid is `uid`; None if none came in `timeout`."""
    deadline = time.monotonic() + timeout
    _ptrace(PTRACE_SEIZE, colod_pid, 0, PTRACE_O_TRACEFORK | PTRACE_O_TRACESYSGOOD)
    children = set()
    found = None
    try:
        trigger()
        while found is None:
            got = _wait(-1, deadline)
            if got is None:
                break
            pid, status = got
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                children.discard(pid)
                continue
            if not os.WIFSTOPPED(status):
                continue
            if pid == colod_pid:
                if status >> 16 == PTRACE_EVENT_FORK:
                    child = ctypes.c_ulong()
                    _ptrace(PTRACE_GETEVENTMSG, pid, 0, ctypes.addressof(child))
                    children.add(child.value)
                _resume(PTRACE_CONT, pid, status)
                continue
            children.add(pid)
            if real_uid(pid) == uid:
                found = pid
                children.discard(pid)
                # Pending while it is held here, SIGSTOP is the first thing it meets once let go.
                os.kill(pid, signal.SIGSTOP)
                _ptrace(PTRACE_DETACH, pid, 0, 0)
                break
            _resume(PTRACE_SYSCALL, pid, status)
    finally:
        let_go_by = time.monotonic() + 10
        for child in children:
            _let_go(child, let_go_by)
        _let_go(colod_pid, let_go_by)
    return found


def process_state(pid):
    """The state letter of /proc/PID/stat ('T' stopped, 'Z' zombie), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
