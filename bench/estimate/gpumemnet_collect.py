#!/usr/bin/env python3
"""Builds GPUMemNet's dataset: random MLPs, CNNs (plain, residual and dense shapes) and
Transformers drawn from the thesis' parameter ranges (tables 5.2, 5.4, 5.6), each trained a few
steps on synthetic data on the GPU while its peak memory is measured.

    gpumemnet_collect.py --out DIR [--workers 6] [--seconds 480] [--per-family N]

Several workers share the GPU, each capped by torch.cuda.set_per_process_memory_fraction. A
configuration is identified by (family, index) and drawn from a generator seeded by both, so a
re-run skips what DIR already holds and continues where it stopped (resumable). Each line of
DIR/<family>-w<worker>.jsonl is one configuration: its parameters, colo-profile's summary of the
model (the features colo computes come from it), and the measured peak:
  peak_reserved_bytes  torch.cuda.max_memory_reserved() over the steps (the caching allocator)
  baseline_bytes       what NVML shows for the worker after empty_cache (context, libraries)
  peak_bytes           baseline + peak_reserved: what NVML shows at the peak of a fresh process
Configurations that do not fit under the cap are recorded as status "over-cap".
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

ACTIVATIONS = ["ReLU", "ELU", "Tanh", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Mish"]
STEPS = 3


def log_uniform(rng, low, high):
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


# ----------------------------------------------------------------------------------------------
# Configurations (pure data, drawn reproducibly)


def draw(family, index):
    rng = random.Random(f"{family}:{index}")
    if family == "mlp":
        inputs = log_uniform(rng, 4, 4096)
        layers = rng.randint(2, 12)
        shape = rng.choice(["pyramid", "uniform", "bottleneck", "gradual"])
        return {
            "inputs": inputs,
            "outputs": max(1, min(1024, log_uniform(rng, 1, max(1, inputs // 4)))),
            "layers": layers,
            "width": log_uniform(rng, 16, 8192),
            "shape": shape,
            "batchnorm": rng.random() < 0.5,
            "dropout": rng.choice([0.0, 0.1, 0.3, 0.5]),
            "activation": rng.choice(ACTIVATIONS),
            "batch": log_uniform(rng, 4, 1024),
        }
    if family == "cnn":
        return {
            "channels": rng.choice([1, 3]),
            "image": rng.choice([32, 64, 96, 128, 160, 224]),
            "classes": log_uniform(rng, 2, 22000),
            "filters": log_uniform(rng, 16, 512),
            "kernel": rng.choice([3, 5, 7]),
            "convs": rng.randint(1, 29),
            "shape": rng.choice(["uniform", "pyramid", "bottleneck", "residual", "dense"]),
            "batchnorm": rng.random() < 0.6,
            "dropout": rng.choice([0.0, 0.0, 0.1, 0.25]),
            "activation": rng.choice(ACTIVATIONS),
            "batch": log_uniform(rng, 2, 128),
        }
    if family == "transformer":
        heads = rng.choice([2, 4, 8, 12, 16])
        embed = heads * max(8, log_uniform(rng, 128, 2048) // heads)
        return {
            "embed": embed,
            "heads": heads,
            "layers": rng.randint(1, 26),
            "ff_ratio": rng.choice([2, 3, 4]),
            "dropout": round(rng.uniform(0.1, 0.5), 2),
            "seq": rng.choice([128, 256, 512, 1024]),
            "vocab": log_uniform(rng, 50000, 1000000),
            "classes": log_uniform(rng, 2, 1000),
            "activation": rng.choice(["relu", "gelu"]),
            "batch": log_uniform(rng, 1, 128),
        }
    raise ValueError(family)


# ----------------------------------------------------------------------------------------------
# Models (torch from here on)


def build(family, c):
    import torch
    from torch import nn

    def act():
        return getattr(nn, c["activation"])()

    if family == "mlp":
        widths = []
        for i in range(c["layers"] - 1):
            frac = i / max(1, c["layers"] - 2)
            if c["shape"] == "uniform":
                w = c["width"]
            elif c["shape"] == "pyramid":
                w = c["width"] // (2 ** i)
            elif c["shape"] == "bottleneck":
                w = int(c["width"] * (0.25 + 0.75 * abs(2 * frac - 1)))
            else:  # gradual
                w = int(c["width"] * (1 - 0.6 * frac))
            widths.append(max(8, w))
        mods, prev = [], c["inputs"]
        for w in widths:
            mods.append(nn.Linear(prev, w))
            if c["batchnorm"]:
                mods.append(nn.BatchNorm1d(w))
            mods.append(act())
            if c["dropout"]:
                mods.append(nn.Dropout(c["dropout"]))
            prev = w
        mods.append(nn.Linear(prev, c["outputs"]))
        return nn.Sequential(*mods), (c["inputs"],)

    if family == "cnn":
        return CNN(c), (c["channels"], c["image"], c["image"])

    if family == "transformer":
        return TokenClassifier(c), None
    raise ValueError(family)


def _cnn_classes():
    import torch
    from torch import nn

    class ConvUnit(nn.Module):
        def __init__(self, cin, cout, c):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, c["kernel"], padding=c["kernel"] // 2,
                                  bias=not c["batchnorm"])
            self.norm = nn.BatchNorm2d(cout) if c["batchnorm"] else nn.Identity()
            self.act = getattr(nn, c["activation"])()
            self.drop = nn.Dropout(c["dropout"]) if c["dropout"] else nn.Identity()

        def forward(self, x):
            return self.drop(self.act(self.norm(self.conv(x))))

    class Residual(nn.Module):
        def __init__(self, channels, c):
            super().__init__()
            self.unit = ConvUnit(channels, channels, c)

        def forward(self, x):
            return x + self.unit(x)

    class Dense(nn.Module):
        def __init__(self, cin, growth, c):
            super().__init__()
            self.unit = ConvUnit(cin, growth, c)

        def forward(self, x):
            return torch.cat([x, self.unit(x)], 1)

    class CNN(nn.Module):
        """`convs` convolutions in stages; each stage halves the image (max-pool) and, depending
        on the shape, widens, narrows or keeps the channels; residual and dense stages add skip
        connections and concatenations."""

        def __init__(self, c):
            super().__init__()
            f, convs, shape = c["filters"], c["convs"], c["shape"]
            stages = max(1, min(5, int(math.log2(c["image"] // 4))))
            per_stage = max(1, math.ceil(convs / stages))
            layers = [ConvUnit(c["channels"], f, c)]
            channels, made = f, 1
            stage = 0
            while made < convs:
                for _ in range(per_stage):
                    if made >= convs:
                        break
                    if shape == "residual":
                        layers.append(Residual(channels, c))
                    elif shape == "dense":
                        growth = max(8, f // 4)
                        layers.append(Dense(channels, growth, c))
                        channels += growth
                    else:
                        out = channels
                        if shape == "pyramid":
                            out = min(2048, channels * 2) if made % per_stage == 0 else channels
                        elif shape == "bottleneck":
                            out = max(8, channels // 2) if stage < stages // 2 else min(2048, channels * 2)
                        layers.append(ConvUnit(channels, out, c))
                        channels = out
                    made += 1
                if stage < stages - 1:
                    layers.append(nn.MaxPool2d(2))
                stage += 1
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.flatten = nn.Flatten()
            self.head = nn.Linear(channels, c["classes"])

        def forward(self, x):
            return self.head(self.flatten(self.pool(self.features(x))))

    return CNN


def CNN(c):
    return _cnn_classes()(c)


def TokenClassifier(c):
    import torch
    from torch import nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(c["vocab"], c["embed"])
            self.positions = nn.Embedding(c["seq"], c["embed"])
            layer = nn.TransformerEncoderLayer(c["embed"], c["heads"], c["embed"] * c["ff_ratio"],
                                               c["dropout"], activation=c["activation"], batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, c["layers"], enable_nested_tensor=False)
            self.norm = nn.LayerNorm(c["embed"])
            self.head = nn.Linear(c["embed"], c["classes"])

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.encoder(self.tokens(ids) + self.positions(pos))
            return self.head(self.norm(x).mean(1))

    return Model()


def inputs_for(family, c, shape, batch, device):
    import torch

    if family == "transformer":
        return torch.randint(0, c["vocab"], (batch, c["seq"]), device=device)
    return torch.randn((batch,) + tuple(shape), device=device)


def rough_bytes(c, summary, batch):
    """A generous upper bound used only to skip configurations that cannot fit under the cap."""
    t = summary["totals"]
    return 16 * t["parameters"] + 4 * 3 * t["activations_per_sample"] * batch


# ----------------------------------------------------------------------------------------------
# Workers


def worker(index, workers, families, out_dir, deadline, cap_fraction, per_family):
    import torch
    import torch.nn.functional as F
    import colo_profile
    from colo_calibrate import Nvml, nvml_index_of_current_device

    torch.cuda.set_per_process_memory_fraction(cap_fraction)
    cap = int(torch.cuda.get_device_properties(0).total_memory * cap_fraction)
    nvml = Nvml()
    handle = nvml.handle(nvml_index_of_current_device(nvml))
    # Load what every family will use (cuBLAS, cuDNN, attention kernels) before the baseline.
    warm = TokenClassifier(draw("transformer", 0) | {"vocab": 1000, "layers": 1, "embed": 64,
                                                       "heads": 2, "seq": 16}).cuda()
    F.cross_entropy(warm(torch.randint(0, 1000, (2, 16), device="cuda")), torch.zeros(2, dtype=torch.long, device="cuda")).backward()
    conv = torch.nn.Conv2d(3, 8, 3).cuda()
    conv(torch.randn(2, 3, 16, 16, device="cuda")).sum().backward()
    del warm, conv
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    baseline = nvml.process_memory(handle).get(os.getpid(), 0)

    done = set()
    for name in os.listdir(out_dir):
        if name.endswith(".jsonl"):
            with open(os.path.join(out_dir, name)) as f:
                for line in f:
                    try:
                        row = json.loads(line)
                        done.add((row["family"], row["index"]))
                    except (ValueError, KeyError):
                        pass  # a line cut short by a stop; redone
    written = 0
    for i in range(per_family):
        for family in families:
            if time.time() > deadline:
                return written
            n = i * workers + index
            if (family, n) in done:
                continue
            c = draw(family, n)
            row = {"family": family, "index": n, "config": c, "cap_bytes": cap,
                   "baseline_bytes": baseline}
            try:
                row.update(measure(family, c, cap, torch, F, colo_profile))
            except torch.cuda.OutOfMemoryError:
                row["status"] = "over-cap"
            except Exception as error:  # noqa: BLE001 - a bad draw must not stop the collection
                row["status"] = "error"
                row["error"] = f"{type(error).__name__}: {error}"[:300]
            if row.get("status") == "ok":
                row["peak_bytes"] = baseline + row["peak_reserved_bytes"]
            gc.collect()
            torch.cuda.empty_cache()
            with open(os.path.join(out_dir, f"{family}-w{index}.jsonl"), "a") as out:
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
            written += 1
    return written


def measure(family, c, cap, torch, F, colo_profile):
    model, shape = build(family, c)
    model = model.cuda()
    batch = c["batch"]
    probe = inputs_for(family, c, shape, min(batch, 2), "cuda")
    layers, totals = colo_profile.describe(model, probe, probe.shape[0])
    summary = {"format": colo_profile.SUMMARY_FORMAT, "version": colo_profile.SUMMARY_VERSION,
               "model": f"gpumemnet-{family}", "batch": batch, "optimizer": "adam",
               "precision": "fp32", "totals": totals,
               "layers": [{k: v for k, v in layer.items() if k != "name"} for layer in layers]}
    if rough_bytes(c, summary, batch) > 3 * cap:
        return {"status": "over-cap", "summary": summary}
    del probe
    torch.cuda.reset_peak_memory_stats()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    started = time.monotonic()
    out = loss = None
    for _ in range(STEPS):
        x = inputs_for(family, c, shape, batch, "cuda")
        out = model(x)
        if family == "mlp":
            loss = F.mse_loss(out, torch.zeros_like(out))
        else:
            loss = F.cross_entropy(out, torch.randint(0, out.shape[1], (batch,), device="cuda"))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    seconds = time.monotonic() - started
    result = {"status": "ok", "summary": summary, "seconds": round(seconds, 3),
              "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
              "peak_allocated_bytes": torch.cuda.max_memory_allocated()}
    del model, opt, out, loss, x
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=480)
    parser.add_argument("--per-family", type=int, default=100000,
                        help="configurations per family and worker at most")
    parser.add_argument("--families", default="mlp,cnn,transformer")
    parser.add_argument("--cap-fraction", type=float, default=0.0,
                        help="GPU memory share per worker (default: 0.85 / workers)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    deadline = time.time() + args.seconds
    fraction = args.cap_fraction or 0.85 / args.workers
    families = args.families.split(",")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.workers) as pool:
        results = [pool.apply_async(worker, (i, args.workers, families, args.out, deadline,
                                             fraction, args.per_family))
                   for i in range(args.workers)]
        counts = [r.get() for r in results]
    print(f"collected {sum(counts)} configurations with {args.workers} workers")


if __name__ == "__main__":
    main()
