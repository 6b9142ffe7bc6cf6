#!/usr/bin/env python3
"""colo-profile through the real program, on fake tensors: the documented examples (--step and
colo.profile()), Hugging Face task heads, and the errors a user gets for a step that cannot be
profiled. Needs torch 2.1+ (with torchvision, timm and transformers for the examples that use
them); exits 77 (skipped) without torch.

    COLO_BIN_DIR=build/bin python3 tests/profile/test_profile.py
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.abspath(os.environ.get("COLO_BIN_DIR", os.path.join(ROOT, "build", "bin")))
EXAMPLES = os.path.join(ROOT, "examples", "profile")


def has(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def torch_usable():
    if not has("torch"):
        return False
    import torch

    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 1)


class ProfileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="colo-profile-test-")

    def profile(self, *args, expect=0):
        out = subprocess.run([os.path.join(BIN, "colo-profile"), *args], capture_output=True,
                             text=True, cwd=self.dir, timeout=600)
        self.assertEqual(out.returncode, expect, f"colo-profile {' '.join(args)}:\n{out.stdout}{out.stderr}")
        return out

    def estimate(self, summary):
        out = subprocess.run([os.path.join(BIN, "colo"), "estimate", summary, "--json"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        answers = {a["estimator"]: a for a in json.loads(out.stdout)["estimates"]}
        self.assertIn("trace", answers, out.stdout)
        self.assertNotIn("error", answers["trace"], out.stdout)
        return answers["trace"]

    def check_summary(self, path, batches):
        with open(path) as f:
            summary = json.load(f)
        self.assertEqual(summary["format"], "colo-model-summary")
        self.assertEqual(sorted(t["batch"] for t in summary["traces"]), sorted(batches))
        for trace in summary["traces"]:
            trace_path = os.path.join(os.path.dirname(path), trace["file"])
            self.assertTrue(os.path.getsize(trace_path) > 100, trace_path)
            self.assertGreater(trace["peak_live_bytes"], summary["totals"]["parameter_bytes"])
        self.assertGreater(summary["totals"]["parameters"], 0)
        self.assertGreater(summary["totals"].get("flops_per_step", 0), 0)
        return summary

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    # The documented examples, each through `colo-profile --step`.

    def test_custom_module_with_two_inputs(self):
        self.profile("--step", os.path.join(EXAMPLES, "two_inputs.py") + ":workload",
                     "--batch", "64", "--batch", "256", "-o", "fusion.json")
        summary = self.check_summary(os.path.join(self.dir, "fusion.json"), [64, 256])
        self.assertEqual(summary["input"]["kind"], "tensors")
        shapes = [t["shape"] for t in summary["input"]["tensors"]]
        self.assertIn([-1, 3, 96, 96], shapes)
        self.assertIn([-1, 64], shapes)
        # More batch, more memory: the traces differ as the batch does.
        peaks = {t["batch"]: t["peak_live_bytes"] for t in summary["traces"]}
        self.assertGreater(peaks[256], peaks[64])
        self.estimate(os.path.join(self.dir, "fusion.json"))

    @unittest.skipUnless(has("torchvision"), "torchvision")
    def test_torchvision_cnn(self):
        self.profile("--step", os.path.join(EXAMPLES, "torchvision_cnn.py") + ":workload",
                     "--batch", "32", "-o", "cnn.json")
        summary = self.check_summary(os.path.join(self.dir, "cnn.json"), [32])
        self.assertEqual(summary["precision"], "amp-bf16")
        self.assertEqual(summary["optimizer"], "sgd")
        self.assertTrue(any(l["type"] == "Conv2d" for l in summary["layers"]))

    @unittest.skipUnless(has("timm"), "timm")
    def test_timm_vit_with_its_own_step(self):
        self.profile("--step", os.path.join(EXAMPLES, "timm_vit.py") + ":workload",
                     "--batch", "16", "-o", "vit.json")
        summary = self.check_summary(os.path.join(self.dir, "vit.json"), [16])
        self.assertEqual(summary["optimizer"], "adamw")

    @unittest.skipUnless(has("transformers"), "transformers")
    def test_hf_classifier(self):
        self.profile("--step", os.path.join(EXAMPLES, "hf_classifier.py") + ":workload",
                     "--batch", "8", "-o", "cls.json")
        summary = self.check_summary(os.path.join(self.dir, "cls.json"), [8])
        self.assertEqual(summary["input"]["kind"], "tokens")
        self.assertEqual(summary["input"]["sequence_length"], 256)
        classifier = [l for l in summary["layers"] if l["name"] == "classifier"]
        self.assertEqual(classifier[0]["output_shape"], [-1, 3])

    @unittest.skipUnless(has("torchvision"), "torchvision")
    def test_python_api_leaves_the_model_as_it_was(self):
        package = self.profile("--python-path").stdout.strip()
        script = self.write("api.py", f"""
            import sys
            sys.path.insert(0, {package!r})
            import torch, torch.nn.functional as F, torchvision
            import colo
            model = torchvision.models.resnet18(num_classes=10)
            before = model.conv1.weight.detach().clone()
            batch = (torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,)))
            summary = colo.profile(model, batch, forward=lambda m, b: m(b[0]),
                                   loss_fn=lambda out, b: F.cross_entropy(out, b[1]),
                                   optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                   batch_sizes=[16, 32], output="api.json")
            assert torch.equal(model.conv1.weight, before), "the model's weights changed"
            assert model.conv1.weight.device.type == "cpu"
            loss = F.cross_entropy(model(batch[0]), batch[1])   # still trainable for real
            loss.backward()
            print("ok", len(summary["traces"]))
            """)
        out = subprocess.run([sys.executable, script], capture_output=True, text=True, cwd=self.dir,
                             timeout=600)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("ok 2", out.stdout)
        self.check_summary(os.path.join(self.dir, "api.json"), [16, 32])

    def test_python_path_is_importable(self):
        out = self.profile("--python-path")
        self.assertTrue(os.path.isfile(os.path.join(out.stdout.strip(), "colo", "__init__.py")))

    # Hugging Face task heads.

    @unittest.skipUnless(has("transformers"), "transformers")
    def test_hf_task_heads(self):
        for task, head_out in (("sequence-classification", [-1, 2]),
                               ("token-classification", [-1, 128, 2])):
            self.profile("hf:distilbert?n_layers=2", "--task", task, "--batch", "4",
                         "--seq-len", "128", "-o", f"{task}.json")
            summary = self.check_summary(os.path.join(self.dir, f"{task}.json"), [4])
            self.assertEqual(summary["input"]["task"], task)
            classifier = [l for l in summary["layers"] if l["name"] == "classifier"]
            self.assertEqual(classifier[0]["output_shape"], head_out)
        self.profile("hf:distilbert?n_layers=2", "--batch", "4", "--seq-len", "128", "-o", "mlm.json")
        mlm = self.estimate(os.path.join(self.dir, "mlm.json"))["peak"]
        cls = self.estimate(os.path.join(self.dir, "sequence-classification.json"))["peak"]
        # The masked-LM head's 30k-word logits cost memory a classifier never has.
        self.assertLess(cls, mlm)

    def test_the_optimizer_steps_as_it_would_on_the_gpu(self):
        # On a real GPU, torch steps Adam with its multi-tensor kernels unless told otherwise: one
        # temporary per parameter, all alive at once beside the gradients. A user's explicit
        # choice of the per-parameter loop is kept.
        script = self.write("opt.py", """
            import torch, colo

            def net():
                return torch.nn.Sequential(*[torch.nn.Linear(512, 512, bias=False) for _ in range(4)])

            def default():
                return colo.Workload(net(), torch.randn(4, 512), optimizer="adam")

            def loop():
                model = net()
                return colo.Workload(model, torch.randn(4, 512),
                                     optimizer=torch.optim.Adam(model.parameters(), foreach=False))
            """)
        weight = 512 * 512 * 4

        def most_weights_alive(name):
            self.profile("--step", f"{script}:{name}", "--steps", "3", "-o", f"{name}.json")
            with open(os.path.join(self.dir, f"{name}.json")) as f:
                summary = json.load(f)
            sizes, alive, most, inside = [], set(), 0, False
            with open(os.path.join(self.dir, summary["traces"][0]["file"])) as f:
                for line in f:
                    kind, *rest = line.split()
                    if kind == "m":
                        inside = rest[0] == "step2"
                    elif kind == "a":
                        sizes.append(int(rest[0]))
                        if inside and sizes[-1] == weight:
                            alive.add(len(sizes) - 1)
                    elif kind == "f":
                        alive.discard(int(rest[0]))
                    most = max(most, len(alive))
            return most

        # Traced on the GPU's code paths or, without a visible GPU, the CPU's: the same either way.
        default = most_weights_alive("default")
        self.assertEqual(default, 8, "4 gradients and 4 temporaries")
        # The loop holds one parameter's temporaries at a time (torch 2.11: 3).
        self.assertLess(most_weights_alive("loop"), default)

    # Errors the user can act on.

    def test_a_step_that_reads_tensor_values_is_explained(self):
        script = self.write("reads.py", """
            import torch, colo

            class Gate(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = torch.nn.Linear(8, 8)

                def forward(self, x):
                    if x.mean().item() > 0:   # reads a value
                        return self.fc(x)
                    return x

            def workload():
                return colo.Workload(Gate(), torch.randn(4, 8))
            """)
        out = self.profile("--step", script + ":workload", "-o", "x.json", expect=2)
        self.assertIn("reads a tensor's values", out.stderr)
        self.assertIn("reads.py:10", out.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.json")))

    def test_an_operator_without_a_fake_implementation_is_explained(self):
        script = self.write("op.py", """
            import torch, colo

            @torch.library.custom_op("colotest::scale", mutates_args=())
            def scale(x: torch.Tensor) -> torch.Tensor:
                return x * 2

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = torch.nn.Linear(8, 8)

                def forward(self, x):
                    return scale(self.fc(x))

            def workload():
                return colo.Workload(Net(), torch.randn(4, 8))
            """)
        out = self.profile("--step", script + ":workload", "-o", "x.json", expect=2)
        self.assertIn("colotest", out.stderr)
        self.assertIn("fake", out.stderr)
        self.assertIn("op.py", out.stderr)

    def test_bad_requests(self):
        out = self.profile("torchvision:resnet18", "--task", "sequence-classification", "--batch", "2",
                           "-o", "x.json", expect=2)
        self.assertIn("--task", out.stderr)
        script = self.write("wrong.py", "def workload():\n    return 42\n")
        out = self.profile("--step", script + ":workload", "--batch", "2", "-o", "x.json", expect=2)
        self.assertIn("colo.Workload", out.stderr)
        out = self.profile("--step", script + ":missing", "-o", "x.json", expect=2)
        self.assertIn("no function 'missing'", out.stderr)
        out = self.profile("--step", os.path.join(self.dir, "nope.py") + ":workload", "-o", "x.json",
                           expect=2)
        self.assertIn("no such script", out.stderr)


if __name__ == "__main__":
    if not torch_usable():
        print("skipped: torch 2.1 or newer is not installed")
        sys.exit(77)
    unittest.main(verbosity=2)
