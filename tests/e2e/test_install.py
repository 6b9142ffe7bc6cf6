"""`make install` through the real build: cmake --install into a staging directory (DESTDIR, as
packagers do), then the installed programs run a job, the systemd unit points at the installed
colod, the bash completion completes subcommands and options, and the man pages render."""

import os
import re
import shutil
import subprocess

import harness

BUILD_DIR = os.path.dirname(os.path.abspath(harness.BIN_DIR))
PREFIX = "/usr/local"


class InstallTest(harness.E2ETest):
    def setUp(self):
        super().setUp()
        if not os.path.isfile(os.path.join(BUILD_DIR, "cmake_install.cmake")):
            harness.skip_file(f"{BUILD_DIR} is not a CMake build directory")
        self.stage = self.mkdir("stage")
        env = dict(os.environ, DESTDIR=self.stage)
        r = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", PREFIX], env=env,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.root = self.stage + PREFIX

    def installed(self, *parts):
        path = os.path.join(self.root, *parts)
        self.assertTrue(os.path.exists(path), f"{path} was not installed")
        return path

    def test_installed_programs_run_a_job(self):
        colod = self.installed("bin", "colod")
        colo = self.installed("bin", "colo")
        self.installed("bin", "colo-shim")
        self.installed("share", "colo", "gpumemnet.json")
        self.installed("share", "colo", "python", "colo", "profiler.py")
        config = self.installed("etc", "colo", "colod.toml")
        check = subprocess.run([colod, "--config", config, "--check-config"],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stderr)
        # colod finds the installed colo-shim beside itself.
        self.assertIn(f'shim = "{self.root}/bin/colo-shim"', check.stdout)
        daemon = harness.Colod(self.tmp, fake_gpus=1)
        daemon.argv = lambda: [colod, "--fake-gpus", "1", "--config", daemon.config_path,
                               "--state-dir", daemon.state_dir, "--socket", daemon.socket]
        self.daemons.append(daemon)
        daemon.start()
        env = self.client_env(socket_path=daemon.socket)
        out = subprocess.run([colo, "submit", "--json", "--", "sh", "-c", "echo installed"],
                             env=env, cwd=self.tmp, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        job = str(harness.json.loads(out.stdout)["job"])
        logs = subprocess.run([colo, "logs", "-f", job], env=env, capture_output=True, text=True,
                              timeout=60)
        self.assertEqual((logs.returncode, logs.stdout), (0, "installed\n"), logs.stderr)

    def test_systemd_unit_points_at_the_installed_colod(self):
        unit = self.installed("lib", "systemd", "system", "colod.service")
        with open(unit) as f:
            text = f.read()
        self.assertIn(f"ExecStart={PREFIX}/bin/colod --config {PREFIX}/etc/colo/colod.toml\n",
                      text)
        self.assertIn("ExecReload=/bin/kill -HUP $MAINPID", text)

    def test_bash_completion_completes_subcommands_and_options(self):
        script = self.installed("share", "bash-completion", "completions", "colo")

        def complete(*words):
            line = " ".join(f"'{w}'" for w in words)
            r = subprocess.run(["bash", "-c", f'source "$1"; COMP_WORDS=({line}); '
                                f'COMP_CWORD={len(words) - 1}; _colo; echo "${{COMPREPLY[*]}}"',
                                "bash", script], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout.split()

        self.assertEqual(complete("colo", "qu"), ["queue"])
        self.assertIn("submit", complete("colo", ""))
        self.assertEqual(complete("colo", "logs", "--fo"), ["--follow"])
        self.assertIn("--noheader", complete("colo", "queue", "--"))
        self.installed("share", "bash-completion", "completions", "colod")
        zsh = self.installed("share", "zsh", "vendor-completions", "_colo")
        if shutil.which("zsh"):
            r = subprocess.run(["zsh", "-n", zsh], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(zsh) as f:
            text = f.read()
        self.assertTrue(text.startswith("#compdef colo\n"))
        self.assertIn("'queue:jobs waiting and running (like squeue)'", text)

    def test_man_pages_have_content_and_name_files_that_exist(self):
        """colo(1) and colod(8) say more than --help: examples, environment, files, exit status,
        see also; every file of the source they (or --help) point at exists."""
        for page, section in (("colo.1", "man1"), ("colod.8", "man8")):
            with open(self.installed("share", "man", section, page)) as f:
                roff = f.read()
            for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES",
                            "ENVIRONMENT", "FILES", "EXIT STATUS", "SEE ALSO"):
                self.assertIn(f"\n.SH {heading}\n", roff, f"{page}: no {heading}")
            examples = roff.split(".SH EXAMPLES\n")[1].split(".SH ")[0]
            self.assertGreaterEqual(examples.count(".TP"), 5, page)
            status = roff.split(".SH EXIT STATUS\n")[1].split(".SH ")[0]
            self.assertEqual(re.findall(r"\\fB(\d)\\fR", status), ["0", "1", "2"], page)
            if ".SH COMMANDS" in roff:
                self.assertNotIn("\\fB\\-h\\fR, \\fB\\-\\-help\\fR",
                                 roff.split(".SH COMMANDS")[1], "every command's -h repeated")
        helps = [subprocess.run([self.installed("bin", program), "--help"], capture_output=True,
                                text=True, timeout=30).stdout for program in ("colo", "colod")]
        for page, section in (("colo.1", "man1"), ("colod.8", "man8")):
            with open(self.installed("share", "man", section, page)) as f:
                helps.append(f.read().replace("\\-", "-"))
        for text in helps:
            for path in re.findall(r"\b((?:docs|packaging|tests|bench|examples)/[\w./-]*\w)", text):
                self.assertTrue(os.path.exists(os.path.join(harness.SOURCE_DIR, path)),
                                f"{path} is named but does not exist")

    def test_man_pages_render(self):
        for page, section, needle in (("colo.1", "man1", "colo logs"),
                                      ("colod.8", "man8", "--check-config")):
            path = self.installed("share", "man", section, page)
            with open(path) as f:
                roff = f.read()
            self.assertTrue(roff.startswith(".TH "), roff[:100])
            if shutil.which("man"):
                r = subprocess.run(["man", "-l", path], capture_output=True, text=True,
                                   timeout=30, env=dict(os.environ, MANPAGER="cat", PAGER="cat",
                                                        MANWIDTH="100"))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(needle, r.stdout.replace("\u2010", "-"))
            else:
                self.assertIn(needle.replace("-", "\\-"), roff)


if __name__ == "__main__":
    harness.main()
