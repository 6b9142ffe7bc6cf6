#!/usr/bin/env python3
"""colo-gpumemnet-import and `colo estimate --estimator gpumemnet-paper` through the real programs,
on checkpoints made here in the format PyTorch Lightning saves (torch.save's zip: a pickle that
names torch's tensor rebuilder and storage classes, and each storage's raw bytes), with random
weights of the shapes GPUMemNet publishes. Each class colo answers with is checked against a plain
Python forward pass of the same weights on the input GPUMemNet's published code makes from the
same model. Standard library only (torch is not needed, nor imported)."""

import collections
import io
import json
import math
import os
import pickle
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import types
import unittest
import zipfile

BIN = os.environ.get("COLO_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
MIB = 2 ** 20


# ----------------------------------------------------------------------------------------------
# Checkpoints as torch.save writes them


class Tensor:
    def __init__(self, shape, values):
        self.shape, self.values = tuple(shape), list(values)


def _stand_ins():
    """Modules named as torch's, so that pickle writes the globals a real checkpoint holds."""
    torch = sys.modules.get("colo_test_torch")
    if torch:
        return torch
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):  # never called: the importer must not import torch
        raise AssertionError("called")

    _rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils
    torch.FloatStorage = type("FloatStorage", (), {"__module__": "torch"})
    torch.LongStorage = type("LongStorage", (), {"__module__": "torch"})
    sys.modules.update({"torch": torch, "torch._utils": utils, "colo_test_torch": torch})
    return torch


def write_checkpoint(path, state_dict, extra=None):
    torch = _stand_ins()
    storages = []

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, tuple) and len(obj) == 3 and obj[0] == "colo-storage":
                return ("storage", torch.FloatStorage, str(obj[1]), "cpu", obj[2])
            return None

        def reducer_override(self, obj):
            if isinstance(obj, Tensor):
                key = len(storages)
                storages.append(struct.pack(f"<{len(obj.values)}f", *obj.values))
                stride, n = [], 1
                for d in reversed(obj.shape):
                    stride.insert(0, n)
                    n *= d
                storage = ("colo-storage", key, len(obj.values))
                return torch._utils._rebuild_tensor_v2, (storage, 0, obj.shape, tuple(stride), False,
                                                         collections.OrderedDict())
            return NotImplemented

    top = {"epoch": 151, "global_step": 1064, "pytorch-lightning_version": "2.4.0",
           "state_dict": collections.OrderedDict(state_dict),
           # What a Lightning checkpoint holds beside the weights, objects of other classes among it.
           "callbacks": {"ModelCheckpoint": {"dirpath": __import__("pathlib").PurePosixPath("/tmp/x")}},
           "optimizer_states": [{"state": {0: {"exp_avg": Tensor((2,), [0.5, 0.25])}}}]}
    top.update(extra or {})
    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(top)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", buffer.getvalue())
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
        for key, raw in enumerate(storages):
            z.writestr(f"archive/data/{key}", raw)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def randn(rng, *shape, scale=1.0):
    n = 1
    for d in shape:
        n *= d
    return Tensor(shape, [f32(rng.gauss(0, scale)) for _ in range(n)])


def positive(rng, n):
    return Tensor((n,), [f32(rng.uniform(0.5, 2.0)) for _ in range(n)])


def linear(rng, state, key, n_in, n_out):
    state[key + ".weight"] = randn(rng, n_out, n_in, scale=1 / math.sqrt(n_in))
    state[key + ".bias"] = randn(rng, n_out, scale=0.1)


def batch_norm(rng, state, key, n):
    state[key + ".weight"] = positive(rng, n)
    state[key + ".bias"] = randn(rng, n, scale=0.1)
    state[key + ".running_mean"] = randn(rng, n)
    state[key + ".running_var"] = positive(rng, n)
    state[key + ".num_batches_tracked"] = Tensor((), [3.0])


def random_mlp(rng, state, prefix, n_in, depth, classes):
    """RandomMLP (Ensemble/models/mlp_models.py): Linear, BatchNorm1d, ReLU per hidden layer."""
    width, index = n_in, 0
    for i in range(depth):
        out = max(4, int(8 * 0.5 ** i))
        linear(rng, state, f"{prefix}{index}", width, out)
        batch_norm(rng, state, f"{prefix}{index + 1}", out)
        width, index = out, index + 3
    linear(rng, state, f"{prefix}{index}", width, classes)


def mlp_ensemble(rng, n_in, classes, depths=(1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6), prefix="models."):
    state = collections.OrderedDict()
    for m, depth in enumerate(depths):
        random_mlp(rng, state, f"{prefix}{m}.model.", n_in, depth, classes)
    return state


def fc_base(rng, n_in, classes, widths=(8, 8, 8, 8, 8, 8)):
    """The test pipeline's FC_base."""
    state = collections.OrderedDict()
    width = n_in
    for i, out in enumerate(widths, 1):
        linear(rng, state, f"model.fc{i}", width, out)
        batch_norm(rng, state, f"model.bn{i}", out)
        width = out
    linear(rng, state, "model.final", width, classes)
    return state


def transformer_ensemble(rng, row, extras, classes, positions, configs=((6, 3, 4), (4, 2, 4))):
    """TransformerEnsemble (Ensemble/models/transformer_models.py) of (d_model, layers, ff)."""
    state = collections.OrderedDict()
    for m, (d, layers, ff) in enumerate(configs):
        p = f"models.{m}."
        state[p + "positional_encoding"] = randn(rng, 1, positions, d)
        linear(rng, state, p + "embedding.0", row, d)
        batch_norm(rng, state, p + "embedding.1", positions)
        linear(rng, state, p + "embedding.3", d, d)
        batch_norm(rng, state, p + "embedding.4", positions)
        for i in range(layers):
            q = f"{p}transformer_encoder.layers.{i}."
            state[q + "self_attn.in_proj_weight"] = randn(rng, 3 * d, d, scale=1 / math.sqrt(d))
            state[q + "self_attn.in_proj_bias"] = randn(rng, 3 * d, scale=0.1)
            linear(rng, state, q + "self_attn.out_proj", d, d)
            linear(rng, state, q + "linear1", d, ff)
            linear(rng, state, q + "linear2", ff, d)
            for norm in ("norm1", "norm2"):
                state[q + norm + ".weight"] = positive(rng, d)
                state[q + norm + ".bias"] = randn(rng, d, scale=0.1)
        for k, depth in enumerate((1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6)):
            random_mlp(rng, state, f"{p}fc_out.models.{k}.model.", d + extras, depth, classes)
    return state


# ----------------------------------------------------------------------------------------------
# The same networks in plain Python


def get(state, key):
    return state[key].values


def apply(state, key, x):
    w, b = get(state, key + ".weight"), get(state, key + ".bias")
    n_out = len(b)
    return [b[o] + sum(w[o * len(x) + i] * x[i] for i in range(len(x))) for o in range(n_out)]


def bn(state, key, x, channel=None):
    g, b, m, v = (get(state, f"{key}.{n}") for n in ("weight", "bias", "running_mean", "running_var"))
    if channel is not None:
        return [(xi - m[channel]) / math.sqrt(v[channel] + 1e-5) * g[channel] + b[channel] for xi in x]
    return [(xi - m[i]) / math.sqrt(v[i] + 1e-5) * g[i] + b[i] for i, xi in enumerate(x)]


def relu(x):
    return [max(0.0, v) for v in x]


def layer_norm(state, key, x):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    g, b = get(state, key + ".weight"), get(state, key + ".bias")
    return [(v - mean) / math.sqrt(var + 1e-5) * g[i] + b[i] for i, v in enumerate(x)]


def mlp_logits(state, prefix, x):
    indices = sorted({int(k[len(prefix):].split(".")[0]) for k in state if k.startswith(prefix)})
    for i in indices:
        key = f"{prefix}{i}"
        if key + ".running_mean" in state:
            x = relu(bn(state, key, x))
        else:
            x = apply(state, key, x)
    return x


def mean(vectors):
    return [sum(c) / len(vectors) for c in zip(*vectors)]


def ensemble_logits(state, prefix, x):
    members = sorted({int(k[len(prefix):].split(".")[0]) for k in state if k.startswith(prefix)})
    return mean([mlp_logits(state, f"{prefix}{m}.model.", x) for m in members])


def fc_base_logits(state, x):
    i = 1
    while f"model.fc{i}.weight" in state:
        x = relu(bn(state, f"model.bn{i}", apply(state, f"model.fc{i}", x)))
        i += 1
    return apply(state, "model.final", x)


def transformer_logits(state, rows, extras, positions):
    outputs = []
    for m in (0, 1):
        p = f"models.{m}."
        d = state[p + "positional_encoding"].shape[2]
        pe = get(state, p + "positional_encoding")
        pooled = [0.0] * d
        for pos in range(positions):
            row = rows[pos] if pos < len(rows) else [0.0] * len(rows[0])
            x = relu(bn(state, p + "embedding.1", apply(state, p + "embedding.0", row), pos))
            x = relu(bn(state, p + "embedding.4", apply(state, p + "embedding.3", x), pos))
            x = [v + pe[pos * d + i] for i, v in enumerate(x)]
            i = 0
            while f"{p}transformer_encoder.layers.{i}.linear1.weight" in state:
                q = f"{p}transformer_encoder.layers.{i}."
                # A sequence of one (the encoder is not batch_first): attention is V, projected.
                w, b = get(state, q + "self_attn.in_proj_weight"), get(state, q + "self_attn.in_proj_bias")
                value = [b[2 * d + o] + sum(w[(2 * d + o) * d + k] * x[k] for k in range(d)) for o in range(d)]
                attended = apply(state, q + "self_attn.out_proj", value)
                x = layer_norm(state, q + "norm1", [a + c for a, c in zip(x, attended)])
                fed = apply(state, q + "linear2", relu(apply(state, q + "linear1", x)))
                x = layer_norm(state, q + "norm2", [a + c for a, c in zip(x, fed)])
                i += 1
            pooled = [a + c for a, c in zip(pooled, x)]
        outputs.append(ensemble_logits(state, p + "fc_out.models.", pooled + extras))
    return mean(outputs)


def argmax(v):
    return max(range(len(v)), key=lambda i: v[i])


# ----------------------------------------------------------------------------------------------
# A Transformer as GPUMemNet's test pipeline has them: a printed module tree, batch and sequence
# length in the file's name; and the inputs its published code makes of it.

TREE = """TinyBert(
  (embeddings): Embeddings(
    (word_embeddings): Embedding(1000, 64, padding_idx=0), 64,000 params
    (position_embeddings): Embedding(32, 64), 2,048 params
    (LayerNorm): LayerNorm((64,), eps=1e-12, elementwise_affine=True), 128 params
    (dropout): Dropout(p=0.1, inplace=False), 0 params
  ), 66,176 params
  (layer): ModuleList(
    (0): Layer(
      (attn): MultiheadAttention(
        (out_proj): NonDynamicallyQuantizableLinear(in_features=64, out_features=64, bias=True), 4,160 params
      ), 16,640 params
      (dense): Linear(in_features=64, out_features=256, bias=True), 16,640 params
      (act): GELUActivation(), 0 params
      (output): Linear(in_features=256, out_features=64, bias=True), 16,448 params
      (LayerNorm): LayerNorm((64,), eps=1e-12, elementwise_affine=True), 128 params
      (dropout): Dropout(p=0.1, inplace=False), 0 params
    ), 49,856 params
  ), 49,856 params
  (head): Linear(in_features=64, out_features=10, bias=True), 650 params
), 116,682 params
=======================================================================
Total params: 116,682
Trainable params: 116,682
"""
BATCH, SEQ = 4, 16
# data_cleaner_transformer_m2.py's list: (kind, activations, parameters); Embedding and Linear
# activations carry the batch, LayerNorm and Dropout those of the latest of them.
SEQUENCE = [("Embedding", SEQ * 64 * BATCH, 64000), ("Embedding", SEQ * 64 * BATCH, 2048),
            ("LayerNorm", SEQ * 64, 128), ("Dropout", SEQ * 64, 0),
            ("Linear", 64 * BATCH, 4160), ("Linear", 256 * BATCH, 16640), ("Linear", 64 * BATCH, 16448),
            ("LayerNorm", 64, 128), ("Dropout", 64, 0), ("Linear", 10 * BATCH, 650)]
KIND = {"LayerNorm": [1, 0, 0, 0], "Embedding": [0, 1, 0, 0], "Linear": [0, 0, 1, 0], "Dropout": [0, 0, 0, 1]}
ACTIVATIONS = sum(a // BATCH if k in ("Embedding", "Linear") else a for k, a, _ in SEQUENCE)
DEPTH, NDQL, LINEARS, NORMS, DROPOUTS, PARAMETERS = 10, 1, 4, 2, 2, 116682
# Ensemble/dataloaders: transformer_data4mlp's columns, and transformer_data4transformer's beside the rows.
COLUMNS = [DEPTH, ACTIVATIONS, ACTIVATIONS * BATCH, PARAMETERS, BATCH, NDQL, LINEARS, NORMS, DROPOUTS]
SEQUENCE_COLUMNS = [DEPTH, ACTIVATIONS, PARAMETERS, BATCH, NDQL, LINEARS, ACTIVATIONS * BATCH, NORMS, DROPOUTS]
# Test_Pipeline/Tester_trans_mlp.py: the attention projection is no Linear there.
TESTER = [DEPTH, ACTIVATIONS, ACTIVATIONS * BATCH, PARAMETERS, BATCH, LINEARS - NDQL, NORMS, DROPOUTS]


class GpuMemNetImportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="colo-gpumemnet-import-")
        self.summary = os.path.join(self.dir, f"TinyBert_bs:{BATCH}_sl:{SEQ}.txt")
        with open(self.summary, "w") as f:
            f.write(TREE)
        self.env = dict(os.environ, XDG_DATA_HOME=os.path.join(self.dir, "data"), HOME=self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_tool(self, *args, expect=0):
        out = subprocess.run(list(args), capture_output=True, text=True, env=self.env)
        self.assertEqual(out.returncode, expect, f"{' '.join(args)}:\n{out.stdout}{out.stderr}")
        return out.stdout + out.stderr

    def import_checkpoint(self, name, state, weights):
        path = os.path.join(self.dir, name + ".ckpt")
        write_checkpoint(path, state)
        return self.run_tool(os.path.join(BIN, "colo-gpumemnet-import"), path, "-o", weights)

    def bucket(self, weights, estimator, summary=None):
        out = self.run_tool(os.path.join(BIN, "colo"), "estimate", summary or self.summary, "--json",
                            "--estimator", estimator, *(["--gpumemnet-paper-weights", weights] if weights else []))
        e = json.loads(out)["estimates"][0]
        self.assertIn("lower", e, out)
        return e["lower"] // (8000 * MIB), e

    def test_each_published_network_answers_as_a_plain_forward_pass_of_its_weights(self):
        rows = [KIND[k] + [a, p] for k, a, p in SEQUENCE]
        classes_seen = set()
        for seed in range(8):
            rng = random.Random(seed)
            weights = os.path.join(self.dir, f"w{seed}.json")
            ensemble = mlp_ensemble(rng, 9, 6)
            self.import_checkpoint("mlp4transformer", ensemble, weights)
            tester = fc_base(rng, 8, 6)
            self.import_checkpoint("transformer_mlp_8gig", tester, weights)
            sequence = transformer_ensemble(rng, 6, 9, 6, positions=24)
            out = self.import_checkpoint("transformer4transformer", sequence, weights)
            self.assertIn("GPUMemNet's transformer estimator 'transformer4transformer' (2 Transformer-encoder members", out)
            expected = {
                "mlp4transformer": argmax(ensemble_logits(ensemble, "models.", COLUMNS)),
                "transformer_mlp_8gig": argmax(fc_base_logits(tester, TESTER)),
                "transformer4transformer": argmax(transformer_logits(sequence, rows, SEQUENCE_COLUMNS, 24)),
            }
            for name, want in expected.items():
                got, e = self.bucket(weights, f"gpumemnet-paper:{name}")
                self.assertEqual(got, want, f"seed {seed}, {name}: {e}")
                self.assertIn(f"GPUMemNet's published transformer estimator {name}", e["detail"])
                classes_seen.add(want)
            # The last one imported answers when none is named.
            self.assertEqual(self.bucket(weights, "gpumemnet-paper")[0], expected["transformer4transformer"])
        self.assertGreater(len(classes_seen), 2, "the random networks should not all answer alike")

    def test_the_default_weights_keep_the_shipped_classifiers_beside_the_imported(self):
        rng = random.Random(42)
        path = os.path.join(self.dir, "transformer4transformer.ckpt")
        write_checkpoint(path, transformer_ensemble(rng, 6, 9, 6, positions=24))
        # Before: the shipped weights have no Transformer classifier.
        out = self.run_tool(os.path.join(BIN, "colo"), "estimate", self.summary, "--estimator", "gpumemnet-paper")
        self.assertIn("no transformer classifier", out)
        self.run_tool(os.path.join(BIN, "colo-gpumemnet-import"), path)
        written = os.path.join(self.dir, "data", "colo", "gpumemnet-paper.json")
        with open(written) as f:
            doc = json.load(f)
        self.assertEqual([e.get("name", "retrained") for e in doc["ensembles"]][0], "transformer4transformer")
        self.assertIn("retrained", [e.get("name", "retrained") for e in doc["ensembles"] if e["family"] == "cnn"])
        _, e = self.bucket(None, "gpumemnet-paper")
        self.assertIn("transformer4transformer", e["detail"])
        cnn = os.path.join(os.path.dirname(__file__), "..", "data", "carma", "vgg_32.model")
        _, e = self.bucket(None, "gpumemnet-paper", cnn)
        self.assertIn("cnn classifier retrained on the published features and data", e["detail"])
        # Imported again: replaced, not doubled.
        self.run_tool(os.path.join(BIN, "colo-gpumemnet-import"), path)
        with open(written) as f:
            names = [e.get("name") for e in json.load(f)["ensembles"]]
        self.assertEqual(names.count("transformer4transformer"), 1)
        # A name it does not have says which it has.
        out = self.run_tool(os.path.join(BIN, "colo"), "estimate", self.summary, "--estimator", "gpumemnet-paper:mlp4mlp")
        self.assertIn("no transformer classifier named mlp4mlp (have: transformer4transformer)", out)

    def test_what_is_not_a_published_estimator_is_refused_with_the_reason(self):
        tool = os.path.join(BIN, "colo-gpumemnet-import")
        weights = os.path.join(self.dir, "w.json")
        text = os.path.join(self.dir, "notes.ckpt")
        with open(text, "w") as f:
            f.write("not a zip")
        self.assertIn("not a PyTorch checkpoint", self.run_tool(tool, text, "-o", weights, expect=1))
        empty = os.path.join(self.dir, "empty.ckpt")
        with zipfile.ZipFile(empty, "w") as z:
            z.writestr("archive/version", "3")
        self.assertIn("no single data.pkl", self.run_tool(tool, empty, "-o", weights, expect=1))
        other = os.path.join(self.dir, "resnet.ckpt")
        rng = random.Random(1)
        write_checkpoint(other, {"conv1.weight": randn(rng, 4, 3, 3, 3)})
        self.assertIn("not one of GPUMemNet's published estimators", self.run_tool(tool, other, "-o", weights, expect=1))
        odd = os.path.join(self.dir, "odd.ckpt")
        write_checkpoint(odd, mlp_ensemble(rng, 11, 6, depths=(1, 2)))
        self.assertIn("an MLP ensemble on 11 features", self.run_tool(tool, odd, "-o", weights, expect=1))
        self.assertFalse(os.path.exists(weights), "nothing written")
        # A pickle that would run code when loaded by pickle itself is read without running it.
        evil = os.path.join(self.dir, "evil.ckpt")
        payload = b"\x80\x02cos\nsystem\nq\x00X\x0c\x00\x00\x00touch /tmp/xq\x01\x85q\x02Rq\x03."
        with zipfile.ZipFile(evil, "w") as z:
            z.writestr("archive/data.pkl", payload)
        self.assertIn("no dictionary", self.run_tool(tool, evil, "-o", weights, expect=1))


if __name__ == "__main__":
    unittest.main()
