#!/usr/bin/env python3
"""colo-profile where PyTorch cannot run it, through the real program: no torch, a torch older than
2.1 (Debian 12's is 1.13), no library for the target kind. Each says exactly that, for which
Python, and how to get it, and writes nothing. Runs with or without torch installed: a package
placed first on the path stands in for the torch it must not find."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("COLO_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))


class WithoutTorchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="colo-profile-no-torch-")
        self.output = os.path.join(self.dir, "model.json")

    def profile(self, torch_source, *args):
        shadow = os.path.join(self.dir, "shadow")
        os.makedirs(os.path.join(shadow, "torch"), exist_ok=True)
        with open(os.path.join(shadow, "torch", "__init__.py"), "w") as f:
            f.write(torch_source)
        env = dict(os.environ, PYTHONPATH=shadow + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run([sys.executable, os.path.join(BIN, "colo-profile"), *args, "-o", self.output],
                             capture_output=True, text=True, env=env)
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertFalse(os.path.exists(self.output))
        self.assertNotIn("Traceback", out.stderr)
        return out.stderr

    def test_no_torch_says_so_for_which_python_and_how_to_get_it(self):
        err = self.profile("raise ImportError('No module named torch')\n", "torchvision:resnet18", "--batch", "8")
        self.assertIn("PyTorch is not installed for " + sys.executable, err)
        self.assertIn("torch 2.1 or newer", err)
        self.assertIn("pip install torch", err)
        self.assertIn('"$(command -v colo-profile)"', err)
        # The same for a user's own step.
        step = os.path.join(self.dir, "train.py")
        with open(step, "w") as f:
            f.write("def workload(batch_size=8):\n    raise AssertionError('not reached')\n")
        self.assertIn("PyTorch is not installed", self.profile("raise ImportError('no')\n", "--step", step + ":workload"))

    def test_an_old_torch_is_named(self):
        err = self.profile("__version__ = '1.13.1+dfsg'\n", "timm:resnet18", "--batch", "8")
        self.assertIn("needs torch 2.1 or newer", err)
        self.assertIn("has torch 1.13.1+dfsg", err)

    def test_a_missing_model_library_is_named(self):
        if importlib.util.find_spec("transformers") is not None:
            self.skipTest("transformers is installed here")
        err = self.profile("__version__ = '2.4.0'\n", "hf:bert", "--batch", "8")
        self.assertIn("hf: targets need the transformers package", err)


if __name__ == "__main__":
    unittest.main()
