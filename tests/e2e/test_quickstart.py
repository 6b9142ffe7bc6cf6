#!/usr/bin/env python3
"""The README's quick start, run as written: its code block, line by line, in an interactive bash
on a terminal (colo top needs one), in a directory whose build/bin is the binaries under test,
as an ordinary user with a home and runtime directory of their own; what the commands print must
be the README's expected output (the user's name, the job-control pid and the job's run time
aside), and colo top must draw job 1 on a GPU before q ends it. And every link of the README and
docs/ resolves."""

import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time

import harness
from harness import wait_until

README = os.path.join(harness.SOURCE_DIR, "README.md")
PROMPT = "QUICKSTART$ "


def readme_blocks():
    """The quick start's commands and its expected output: the first two code blocks of the
    section."""
    with open(README) as f:
        text = f.read()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```[a-z]*\n(.*?)```", section, re.S)
    commands = [line for line in blocks[0].splitlines() if line.strip()]
    return commands, blocks[1].splitlines()


class Terminal:
    """An interactive bash on a pseudo-terminal of 200x30, as `user`."""

    def __init__(self, user, env, cwd):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.chdir(cwd)
                argv = harness.as_user(user, ["bash", "--norc", "--noprofile", "-i"])
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 200, 0, 0))
        self.buffer = ""

    def read_until(self, pattern, deadline):
        end = time.monotonic() + deadline * harness.SLOWER
        while not re.search(pattern, self.buffer):
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} on the terminal:\n{self.buffer[-3000:]}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    self.buffer += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:
                    break
        found = re.search(pattern, self.buffer)
        text, self.buffer = self.buffer[:found.end()], self.buffer[found.end():]
        return text

    def send(self, text):
        os.write(self.fd, text.encode())

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def plain(text):
    """Terminal output without escape sequences and carriage returns."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b[=>]", "", text)
    return text.replace("\r", "")


def normal(line, user):
    """A line as compared: single spaces; the user, pids and elapsed times as placeholders."""
    line = " ".join(line.split())
    line = re.sub(r"^\[1\] \d+$", "[1] PID", line)
    line = re.sub(r"\b\d+:\d\d:\d\d\b", "TIME", line)
    return line.replace(f" {user} ", " USER ")


class QuickStart(harness.E2ETest):
    def test_the_readme_quick_start_runs_as_written(self):
        commands, expected = readme_blocks()
        self.assertLessEqual(len(commands), 10, "the quick start is ten lines at most")
        user = harness.unprivileged_user()
        home = self.mkdir("home", user=user, mode=0o755)
        runtime = self.mkdir("runtime", user=user, mode=0o700)
        work = self.mkdir("home", "source", user=user)
        os.makedirs(os.path.join(work, "build"))
        os.symlink(harness.BIN_DIR, os.path.join(work, "build", "bin"))
        env = {"PATH": harness.SYSTEM_PATH, "HOME": home, "XDG_RUNTIME_DIR": runtime,
               "USER": user.name, "LOGNAME": user.name, "LANG": "C.UTF-8", "TERM": "xterm",
               "PS1": PROMPT}
        name, value = self.token.split("=", 1)
        env[name] = value  # the test's processes, found and ended at cleanup
        env.update(harness.SANITIZER_ENV)
        shell = Terminal(user, env, work)
        self.addCleanup(shell.close)
        shell.read_until(re.escape(PROMPT), 20)
        printed = []
        for command in commands:
            shell.send(command + "\n")
            if command.startswith("colo top"):
                # The live view: job 1 on GPU 0 in its GPU legend and its job list, then q.
                shell.read_until(r"A=1 ", 20)
                shell.read_until(r"RECENT EVENTS", 20)
                shell.send("q")
                shell.read_until(re.escape(PROMPT), 20)
                continue
            out = plain(shell.read_until(re.escape(PROMPT), 30))
            lines = out.splitlines()[1:-1]  # the echoed command, then the next prompt
            printed += [line for line in lines if line.strip()]
            if command.startswith("colod"):
                # colod serves once its socket answers (a person reads the output meanwhile).
                sock = os.path.join(runtime, "colo", "colod.sock")
                wait_until(lambda: os.path.exists(sock), 20, "the quick start's colod")
                time.sleep(0.5)
            else:
                time.sleep(1)  # as a person types the next line
        self.assertEqual([normal(l, user.name) for l in printed],
                         [normal(l, "alice") for l in expected],
                         "\n".join(printed))
        # colod stopped (kill %1), having written its log where the quick start sent it.
        with open(os.path.join(work, "colod.log")) as f:
            log = f.read()
        self.assertIn("colod: serving", log)
        def stopped():
            with open(os.path.join(work, "colod.log")) as f:
                return "colod: stopping" in f.read()

        wait_until(stopped, 20, "colod to stop")


class DocsLinks(harness.E2ETest):
    def test_every_link_and_named_file_of_the_docs_exists(self):
        """The README and docs/*.md: each relative link resolves, and each file of the source
        they name in backquotes (docs/..., packaging/..., tests/..., bench/...) exists."""
        docs = os.path.join(harness.SOURCE_DIR, "docs")
        pages = [README] + [os.path.join(docs, f) for f in sorted(os.listdir(docs))
                            if f.endswith(".md")]
        missing = []
        for page in pages:
            with open(page) as f:
                text = f.read()
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
                if not target.startswith(("http://", "https://")) and not os.path.exists(
                        os.path.join(os.path.dirname(page), target)):
                    missing.append(f"{os.path.basename(page)}: link {target}")
            for path in re.findall(r"`((?:docs|packaging|tests|bench|examples|scripts|src|tools|"
                                   r"data)/[\w./-]*\w)`", text):
                if not os.path.exists(os.path.join(harness.SOURCE_DIR, path)):
                    missing.append(f"{os.path.basename(page)}: {path}")
        self.assertEqual(missing, [])
        with open(README) as f:
            self.assertLessEqual(len(f.read().splitlines()), 250, "the README is an entry page")


if __name__ == "__main__":
    harness.main()
