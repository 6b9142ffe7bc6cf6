#!/usr/bin/env python3
"""colo-gpumemnet-import: GPUMemNet's published estimators, as published, for `colo estimate`.

GPUMemNet (github.com/itu-rad/GPUMemNet) publishes its trained estimators as PyTorch Lightning
checkpoints. This reads a user's copy of one and writes its weights into colo's GPUMemNet weights
file, where `colo estimate --estimator gpumemnet-paper` answers with it:

    colo-gpumemnet-import Ensemble/trained_models/transformer4transformer/transformer4transformer.ckpt
    colo estimate bert.json --estimator gpumemnet-paper

Published estimators it knows, by what the network looks like (the checkpoint names no class):

    Ensemble/trained_models/mlp4mlp, mlp4cnn, mlp4transformer       ensembles of small MLPs
    Ensemble/trained_models/transformer4mlp, transformer4cnn,
                            transformer4transformer                 ensembles of Transformer
                                                                    encoders over the layer sequence
    Test_Pipeline/estimator/transformer_mlp_8gig.ckpt,
                            cnn_mlp_8g.ckpt                         single MLPs of the test pipeline

A checkpoint is a zip archive holding a pickle and the tensors' raw storages. It is read with the
standard library alone: the pickle is unpickled with nothing but dictionaries, lists, numbers,
strings and tensors allowed to be made (any other object it names is kept as an inert placeholder
and never imported or called), so a checkpoint cannot run code here. GPUMemNet carries no license:
colo ships none of its weights; this converts the copy the user has.

The output (default: $XDG_DATA_HOME/colo/gpumemnet-paper.json, ~/.local/share/colo/ when unset,
where `colo estimate` looks first) starts from colo's shipped GPUMemNet weights when it does not
exist yet, so the classifiers colo trained on GPUMemNet's published data stay beside the imported
ones; an imported classifier goes first for its family and is the one `gpumemnet-paper` answers
with, and `gpumemnet-paper:NAME` picks any by name. Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import pickle
import re
import struct
import sys
import zipfile

FORMAT = "colo-gpumemnet-paper"

# The published code that feeds each classifier its input, and the family of its data; colo makes
# the same input from a model summary (its names: src/estimate/gpumemnet_paper.cc).
RECIPES = {
    "mlp_data4mlp": "mlp", "cnn_data4mlp": "cnn", "transformer_data4mlp": "transformer",
    "mlp_data4transformer": "mlp", "cnn_data4transformer": "cnn",
    "transformer_data4transformer": "transformer",
    "Tester_trans_mlp": "transformer", "01-mlp4cnn": "cnn",
}
# The published buckets have 5 classes for MLPs (1 GB) and 6 for CNNs and Transformers (8 GB).
CLASSES = {"mlp": 5, "cnn": 6, "transformer": 6}


class ImportError_(Exception):
    """A checkpoint that is not one of GPUMemNet's published estimators, or not a checkpoint."""


# ----------------------------------------------------------------------------------------------
# Reading a checkpoint without torch


class Placeholder:
    """An object the pickle names but that is not needed (optimizer and callback states): kept
    inert, never imported or called."""

    def __init__(self, name, *args):
        self.name = name
        self.args = args

    def __call__(self, *args, **kwargs):
        return Placeholder(self.name, *args)

    def __setstate__(self, state):
        self.state = state


class Tensor:
    def __init__(self, values, shape):
        self.values = values
        self.shape = tuple(shape)

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


# Storage classes torch writes into a checkpoint's pickle, and their element layout.
STORAGES = {
    "FloatStorage": ("f", 4), "DoubleStorage": ("d", 8), "HalfStorage": ("e", 2),
    "LongStorage": ("q", 8), "IntStorage": ("i", 4), "ShortStorage": ("h", 2),
    "CharStorage": ("b", 1), "ByteStorage": ("B", 1), "BoolStorage": ("?", 1),
    "BFloat16Storage": ("bf16", 2),
}


def _elements(raw, kind, byteorder):
    code, width = STORAGES[kind]
    count = len(raw) // width
    order = "<" if byteorder == "little" else ">"
    if code == "bf16":  # the upper half of a float32
        halves = struct.unpack(f"{order}{count}H", raw[:count * 2])
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    return list(struct.unpack(f"{order}{count}{code}", raw[:count * width]))


def _rebuild_tensor(storage, offset, size, stride, *_rest):
    size = tuple(size)
    if not size:
        return Tensor([storage[offset]], ())
    # Gathered by strides: a checkpoint may hold views of a larger storage.
    values = []
    index = [0] * len(size)
    total = 1
    for d in size:
        total *= d
    for _ in range(total):
        values.append(storage[offset + sum(i * s for i, s in zip(index, stride))])
        for axis in range(len(size) - 1, -1, -1):
            index[axis] += 1
            if index[axis] < size[axis]:
                break
            index[axis] = 0
    return Tensor(values, size)


def read_checkpoint(path):
    """The checkpoint's top-level dictionary, tensors as Tensor."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        raise ImportError_(f"{path}: not a PyTorch checkpoint (a zip archive): {error}")
    with archive:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pickles) != 1:
            raise ImportError_(f"{path}: not a PyTorch checkpoint (no single data.pkl inside)")
        prefix = pickles[0][:-len("data.pkl")]
        byteorder = "little"
        if prefix + "byteorder" in names:
            byteorder = archive.read(prefix + "byteorder").decode().strip() or "little"
        storages = {}

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                if (module, name) == ("collections", "OrderedDict"):
                    return collections.OrderedDict
                if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
                    return _rebuild_tensor
                if module == "torch._utils" and name == "_rebuild_parameter":
                    return lambda data, *_: data
                if module == "torch" and name in STORAGES:
                    return name
                return Placeholder(f"{module}.{name}")

            def persistent_load(self, pid):
                if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
                    raise ImportError_(f"{path}: unexpected record {pid!r:.80} in the pickle")
                kind, key = pid[1], str(pid[2])
                if kind not in STORAGES:
                    raise ImportError_(f"{path}: tensors of type {kind} are not supported")
                if key not in storages:
                    member = f"{prefix}data/{key}"
                    if member not in names:
                        raise ImportError_(f"{path}: the pickle names storage {key}, which is missing")
                    storages[key] = _elements(archive.read(member), kind, byteorder)
                return storages[key]

        try:
            with archive.open(pickles[0]) as data:
                top = Unpickler(data).load()
        except ImportError_:
            raise
        except Exception as error:  # a damaged pickle raises many kinds
            raise ImportError_(f"{path}: unreadable checkpoint: {error}")
    if not isinstance(top, dict):
        raise ImportError_(f"{path}: the checkpoint holds no dictionary")
    return top


# ----------------------------------------------------------------------------------------------
# Recognising the published networks


def _matrix(tensor):
    rows, cols = tensor.shape
    return {"in": cols, "out": rows, "w": tensor.values}


def _linear(state, key):
    weight, bias = state.get(key + ".weight"), state.get(key + ".bias")
    if weight is None or bias is None or len(weight.shape) != 2 or bias.shape != weight.shape[:1]:
        raise ImportError_(f"{key}: not a linear layer")
    layer = _matrix(weight)
    layer["b"] = bias.values
    return layer


def _batch_norm(state, key):
    parts = {name: state.get(f"{key}.{name}") for name in ("weight", "bias", "running_mean", "running_var")}
    if any(t is None for t in parts.values()):
        raise ImportError_(f"{key}: not a batch norm")
    return {"gamma": parts["weight"].values, "beta": parts["bias"].values,
            "mean": parts["running_mean"].values, "var": parts["running_var"].values}


def _is_batch_norm(state, key):
    return key + ".running_mean" in state


def _sequential_member(state, prefix):
    """RandomMLP's nn.Sequential: Linear, BatchNorm1d, ReLU per hidden layer, then a Linear."""
    indices = sorted({int(m.group(1)) for k in state
                      for m in [re.match(re.escape(prefix) + r"(\d+)\.weight$", k)] if m})
    hidden, pending = [], None
    for i in indices:
        key = f"{prefix}{i}"
        if _is_batch_norm(state, key):
            if pending is None:
                raise ImportError_(f"{key}: a batch norm without its linear layer")
            hidden.append({"linear": pending, **_batch_norm(state, key)})
            pending = None
        elif pending is not None:
            raise ImportError_(f"{key}: two linear layers without a batch norm between")
        else:
            pending = _linear(state, key)
    if pending is None:
        raise ImportError_(f"{prefix}: no output layer")
    return {"hidden": hidden, "output": pending}


def _fc_base_member(state):
    """The test pipeline's FC_base: fc1..fcN, each with bnK, then final."""
    count = len([k for k in state if re.match(r"model\.fc\d+\.weight$", k)])
    hidden = []
    for i in range(1, count + 1):
        h = {"linear": _linear(state, f"model.fc{i}")}
        h.update(_batch_norm(state, f"model.bn{i}"))
        hidden.append(h)
    return {"hidden": hidden, "output": _linear(state, "model.final")}


def _members(state, prefix):
    count = len({m.group(1) for k in state for m in [re.match(re.escape(prefix) + r"(\d+)\.", k)] if m})
    return [_sequential_member(state, f"{prefix}{i}.model.") for i in range(count)]


def _encoder_layer(state, key):
    in_proj = {"in": state[key + ".self_attn.in_proj_weight"].shape[1],
               "out": state[key + ".self_attn.in_proj_weight"].shape[0],
               "w": state[key + ".self_attn.in_proj_weight"].values,
               "b": state[key + ".self_attn.in_proj_bias"].values}
    norm = lambda n: {"gamma": state[f"{key}.{n}.weight"].values, "beta": state[f"{key}.{n}.bias"].values}
    return {"in_proj": in_proj, "out_proj": _linear(state, key + ".self_attn.out_proj"),
            "linear1": _linear(state, key + ".linear1"), "linear2": _linear(state, key + ".linear2"),
            "norm1": norm("norm1"), "norm2": norm("norm2")}


def _sequence_member(state, prefix):
    """TransformerClassifier: an embedding of each layer row (Linear, BatchNorm1d over the
    positions, ReLU, twice), a positional encoding, nn.TransformerEncoder layers, the rows summed,
    the extra features beside them, and an ensemble of MLPs on that."""
    positional = state[prefix + "positional_encoding"]
    if len(positional.shape) != 3 or positional.shape[0] != 1:
        raise ImportError_(f"{prefix}positional_encoding: unexpected shape {positional.shape}")
    layers = sorted({int(m.group(1)) for k in state
                     for m in [re.match(re.escape(prefix) + r"transformer_encoder\.layers\.(\d+)\.", k)] if m})
    embedding = [_linear(state, prefix + "embedding.0"), _batch_norm(state, prefix + "embedding.1"),
                 _linear(state, prefix + "embedding.3"), _batch_norm(state, prefix + "embedding.4")]
    return {"positions": positional.shape[1], "d_model": positional.shape[2],
            "positional": positional.values,
            "embedding": embedding,
            "layers": [_encoder_layer(state, f"{prefix}transformer_encoder.layers.{i}") for i in layers],
            "head": _members(state, prefix + "fc_out.models.")}


def recognise(state, origin):
    """(recipe, {"members": ...} or {"sequence_members": ...}) of a published estimator."""
    keys = list(state)
    try:
        if any(re.match(r"models\.\d+\.positional_encoding$", k) for k in keys):
            count = len({m.group(1) for k in keys for m in [re.match(r"models\.(\d+)\.", k)] if m})
            members = [_sequence_member(state, f"models.{i}.") for i in range(count)]
            rows = members[0]["embedding"][0]["in"]
            extras = members[0]["head"][0]["hidden"][0]["linear"]["in"] - members[0]["d_model"]
            recipe = {(6, 9): "transformer_data4transformer", (4, 9): "cnn_data4transformer",
                      (4, 4): "mlp_data4transformer"}.get((rows, extras))
            if recipe is None:
                raise ImportError_(f"a Transformer ensemble on {rows} features per layer and {extras} "
                                   "beside them, which no published dataset has")
            return recipe, {"sequence_members": members}
        if any(re.match(r"models\.\d+\.model\.0\.weight$", k) for k in keys):
            members = _members(state, "models.")
            inputs = members[0]["hidden"][0]["linear"]["in"] if members[0]["hidden"] else members[0]["output"]["in"]
            recipe = {8: "mlp_data4mlp", 10: "cnn_data4mlp", 9: "transformer_data4mlp"}.get(inputs)
            if recipe is None:
                raise ImportError_(f"an MLP ensemble on {inputs} features, which no published dataset has")
            return recipe, {"members": members}
        if "model.fc1.weight" in state and "model.final.weight" in state:
            member = _fc_base_member(state)
            inputs = member["hidden"][0]["linear"]["in"]
            recipe = {8: "Tester_trans_mlp", 9: "01-mlp4cnn"}.get(inputs)
            if recipe is None:
                raise ImportError_(f"a test-pipeline MLP on {inputs} features, which no published tester feeds")
            return recipe, {"members": [member]}
    except (KeyError, ValueError, IndexError) as error:
        raise ImportError_(f"{origin}: incomplete network ({error})")
    except ImportError_ as error:
        raise ImportError_(f"{origin}: {error}")
    raise ImportError_(f"{origin}: not one of GPUMemNet's published estimators (its state_dict has "
                       f"{', '.join(keys[:4])}{', ...' if len(keys) > 4 else ''})")


def convert(path, name=None):
    """The colo weights entry of one published checkpoint."""
    top = read_checkpoint(path)
    state = top.get("state_dict")
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ImportError_(f"{path}: no state_dict of tensors (not a Lightning checkpoint)")
    state = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    recipe, network = recognise(state, path)
    family = RECIPES[recipe]
    entry = {"family": family, "name": name or os.path.splitext(os.path.basename(path))[0],
             "inputs": recipe, "classes": CLASSES[family]}
    outputs = {m["output"]["out"] for m in network.get("members", [])} | {
        h["output"]["out"] for s in network.get("sequence_members", []) for h in s["head"]}
    if outputs != {CLASSES[family]}:
        raise ImportError_(f"{path}: {sorted(outputs)} classes where the published {family} buckets "
                           f"have {CLASSES[family]}")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    epoch = top.get("epoch")
    entry["source"] = f"{os.path.basename(path)} (sha256 {digest}" + (
        f", epoch {epoch})" if isinstance(epoch, int) else ")")
    entry.update(network)
    return entry


# ----------------------------------------------------------------------------------------------
# The weights file


def default_output():
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "colo", "gpumemnet-paper.json")


def shipped_weights():
    here = os.path.dirname(os.path.realpath(__file__))
    for folder in (os.environ.get("COLO_DATA_DIR", ""), os.path.join(here, "..", "share", "colo"),
                   os.path.join(here, "..", "data"), os.path.join(here, "..", "..", "data")):
        path = os.path.join(folder, "gpumemnet-paper.json") if folder else ""
        if path and os.path.isfile(path):
            return path
    return None


def load_weights(path):
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != 1:
        raise ImportError_(f"{path}: not a {FORMAT} version 1 file")
    return doc


def merge(doc, entries):
    """Each entry goes first for its family, replacing one of the same family and name."""
    names = {(e["family"], e["name"]) for e in entries}
    kept = [e for e in doc.get("ensembles", []) if (e.get("family"), e.get("name", "retrained")) not in names]
    doc["ensembles"] = list(entries) + kept
    return doc


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="colo-gpumemnet-import",
        description="Convert GPUMemNet's published estimators (Lightning checkpoints) into colo's "
                    "GPUMemNet weights, for colo estimate --estimator gpumemnet-paper.",
        epilog="Get the checkpoints from github.com/itu-rad/GPUMemNet: Ensemble/trained_models/*/*.ckpt "
               "and Test_Pipeline/estimator/*.ckpt (colo ships none: that repository has no license).")
    parser.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT.ckpt")
    parser.add_argument("-o", "--output", help=f"weights file to write (default {default_output()}); "
                                               "an existing one keeps its other classifiers")
    parser.add_argument("--name", help="name of the imported classifier (default: the file's stem; "
                                       "one checkpoint only)")
    args = parser.parse_args(argv)
    output = args.output or default_output()
    try:
        if args.name and len(args.checkpoints) > 1:
            raise ImportError_("--name goes with one checkpoint")
        entries = [convert(path, args.name) for path in args.checkpoints]
        if os.path.exists(output):
            doc = load_weights(output)
        else:
            start = shipped_weights()
            doc = load_weights(start) if start else {"format": FORMAT, "version": 1, "ensembles": []}
        doc = merge(doc, entries)
        doc["provenance"] = (doc.get("provenance", "") + "; " if doc.get("provenance") else "") + \
            "imported by colo-gpumemnet-import: " + ", ".join(e["source"] for e in entries)
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        temporary = output + ".tmp"
        with open(temporary, "w") as f:
            json.dump(doc, f)
            f.write("\n")
        os.replace(temporary, output)
    except (ImportError_, OSError, json.JSONDecodeError) as error:
        print(f"colo-gpumemnet-import: {error}", file=sys.stderr)
        return 1
    for e in entries:
        kind = "Transformer-encoder" if "sequence_members" in e else "MLP"
        count = len(e.get("sequence_members") or e.get("members"))
        print(f"{e['source'].split(' ')[0]}: GPUMemNet's {e['family']} estimator '{e['name']}' "
              f"({count} {kind} member{'s' if count > 1 else ''}, inputs as {e['inputs']}) -> {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
