#!/usr/bin/env python3
"""The estimator evaluation: real models trained for real on the GPU, next to what colo-profile
recorded for them on fake tensors.

    evaluate.py --out DIR [--cases all|smoke] [--profile-jobs 12] [--run-jobs 4] [--seconds 540]

For every case (model, batch, optimizer, precision):
  1. colo-profile on fake tensors, writing DIR/cases/ID.json and its allocation traces (its GPU
     memory, which must be none, is recorded);
  2. the same model and training loop on the GPU in a fresh process for STEPS steps, while this
     process polls NVML for that process's memory every few milliseconds. The child also reports
     torch's peak reserved/allocated bytes and writes the allocator's own event history as a trace
     (DIR/real/ID.trace), so colo's allocator model can be checked on real allocations too.
Results go to DIR/results.jsonl (one line per case, written as cases finish: a stopped run keeps
what it measured and a re-run skips finished cases). bench/estimate/report.py turns them, with
`colo estimate`, into the table in the README.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
sys.path.insert(0, TOOLS)
REAL_STEPS = 8
PROFILE_STEPS = 3

LLAMA_SMALL = ("llama?hidden_size=1024&intermediate_size=2816&num_hidden_layers=8"
               "&num_attention_heads=16&num_key_value_heads=16&vocab_size=32000")
GPT2_MEDIUM = "gpt2?n_layer=24&n_embd=1024&n_head=16"


def cases(which):
    """(target, batch, optimizer, amp, seq_len)."""
    out = []

    def add(target, batches, optimizer="adam", amp=False, seq=None):
        for b in batches:
            out.append((target, b, optimizer, amp, seq))

    if which == "heldout":
        # Models and settings not in the main set, to check the margins chosen on it.
        add("torchvision:resnet101", [32])
        add("torchvision:wide_resnet50_2", [32], optimizer="sgd")
        add("torchvision:regnet_y_1_6gf", [64])
        add("torchvision:mobilenet_v3_large", [128], amp=True)
        add("torchvision:vgg11", [64], optimizer="sgd")
        add("torchvision:densenet169", [32])
        add("torchvision:efficientnet_b2", [64])
        add("timm:deit_small_patch16_224", [96], optimizer="adamw")
        add("timm:convnext_small", [32])
        add("timm:resnet26d", [64], optimizer="sgd", amp=True)
        add("hf:roberta", [8], seq=512)
        add("hf:gpt2", [2], seq=1024)
        add("hf:gpt2?n_layer=6", [16], optimizer="adamw", amp=True, seq=256)
        add("hf:llama?hidden_size=768&intermediate_size=2048&num_hidden_layers=12"
            "&num_attention_heads=12&num_key_value_heads=12&vocab_size=32000", [4], seq=1024)
        add("hf:t5?decoder_start_token_id=0&pad_token_id=0", [4], seq=512)
        return out
    if which == "user":
        # Users' own code: task heads and the documented examples (their own inputs, loss, step).
        add("hf:bert#sequence-classification", [16], seq=256)
        add("hf:roberta#sequence-classification", [16], seq=256)
        add("hf:distilbert#sequence-classification", [32], seq=256)
        add("hf:bert#token-classification", [16], seq=256)
        add("hf:gpt2?pad_token_id=0#sequence-classification", [8], seq=512)
        add("hf:t5?decoder_start_token_id=0&pad_token_id=0#seq2seq-lm", [8], seq=256)
        examples = os.path.join(HERE, "..", "..", "examples", "profile")
        for script, batch in (("torchvision_cnn.py", 64), ("timm_vit.py", 128),
                              ("hf_classifier.py", 16), ("two_inputs.py", 256)):
            add(f"step:{os.path.join(examples, script)}:workload", [batch])
        return out
    if which == "unseen":
        # timm families no margin or catalogue was chosen on (ConvNeXt variants, EfficientNetV2,
        # RegNet, MaxViT, Swin-V2), at several batches: bench/estimate/unseen.sh.
        add("timm:convnext_nano", [32, 96])
        add("timm:convnextv2_tiny", [32, 64], optimizer="adamw")
        add("timm:convnext_base", [32])
        add("timm:convnext_tiny", [64], amp=True)
        add("timm:efficientnetv2_rw_s", [32, 96])
        add("timm:tf_efficientnetv2_b2", [64], amp=True)
        add("timm:regnety_032", [32, 96])
        add("timm:regnetx_016", [128], optimizer="sgd")
        add("timm:maxvit_nano_rw_256", [32, 64], optimizer="adamw")
        add("timm:maxvit_tiny_tf_224", [32])
        add("timm:swinv2_tiny_window8_256", [32, 64], optimizer="adamw")
        add("timm:swinv2_cr_tiny_ns_224", [48])
        return out
    if which == "smoke":
        add("torchvision:resnet18", [32])
        add("hf:gpt2?n_layer=2", [4], seq=128)
        return out
    add("torchvision:resnet18", [32, 128])
    add("torchvision:resnet50", [32, 64, 128])
    add("torchvision:resnet50", [64], optimizer="sgd")
    add("torchvision:resnet50", [64], amp=True)
    add("torchvision:vgg16", [32, 64])
    add("torchvision:vgg16", [32], optimizer="sgd")
    add("torchvision:mobilenet_v2", [64, 128])
    add("torchvision:efficientnet_b0", [64, 128])
    add("torchvision:efficientnet_b0", [128], amp=True)
    add("torchvision:inception_v3", [32, 64])
    add("torchvision:densenet121", [32, 64])
    add("torchvision:convnext_tiny", [32])
    add("timm:vit_small_patch16_224", [64, 128])
    add("timm:vit_base_patch16_224", [32, 64])
    add("timm:vit_base_patch16_224", [32], optimizer="sgd")
    add("timm:vit_base_patch16_224", [32], amp=True)
    add("timm:swin_tiny_patch4_window7_224", [32])
    add("timm:efficientnet_b3", [32])
    add("hf:bert", [8, 16], seq=512)
    add("hf:bert", [16], amp=True, seq=512)
    add("hf:distilbert", [16], seq=512)
    add("hf:gpt2", [4, 8], seq=512)
    add("hf:gpt2", [8], amp=True, seq=512)
    add("hf:" + GPT2_MEDIUM, [4], seq=512)
    add("hf:t5?decoder_start_token_id=0&pad_token_id=0", [8], seq=256)
    add("hf:" + LLAMA_SMALL, [8], seq=512)
    add("hf:" + LLAMA_SMALL, [8], optimizer="adamw", amp=True, seq=512)
    return out


def split_task(target):
    """'hf:bert#sequence-classification' -> ('hf:bert', 'sequence-classification')."""
    target, _, task = target.partition("#")
    return target, task or None


def case_id(target, batch, optimizer, amp, seq):
    if target.startswith("step:"):
        name = "step-" + os.path.splitext(os.path.basename(target[5:].rpartition(":")[0]))[0]
        return f"{name}-b{batch}"
    target = target.replace("#", "-")
    name = target.replace("torchvision:", "tv-").replace("timm:", "timm-").replace("hf:", "hf-")
    name = name.replace("?", "-").replace("&", "-").replace("=", "").replace(":", "-")
    return f"{name}-b{batch}-{optimizer}{'-amp' if amp else ''}"


# ----------------------------------------------------------------------------------------------
# The real run (child process)


def run_case(args):
    import torch
    import colo_profile

    target, task = split_task(args.target)
    if target.startswith("step:"):
        path, _, function = target[len("step:"):].rpartition(":")
        workload = colo_profile.workload_from_function(
            colo_profile.load_function(path, function), args.batch)
    else:
        spec = colo_profile.ModelSpec(target, seq_len=args.seq_len, task=task)
        workload = spec.workload(args.optimizer, args.amp)
    model = workload.model.to("cuda")
    # With a snapshot kept, each allocation's C++ and Python frames too: which operator made it.
    torch.cuda.memory._record_memory_history(enabled="all", context="all" if args.snapshot else None,
                                             stacks="all" if args.snapshot else "python",
                                             max_entries=2_000_000)
    started = time.monotonic()
    colo_profile.train(workload, model, args.batch, REAL_STEPS, "cuda")
    torch.cuda.synchronize()
    seconds = time.monotonic() - started
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    if args.snapshot:
        import pickle

        with open(args.snapshot, "wb") as out:
            pickle.dump(snapshot, out)
    events, ids, alloc = [], {}, 0
    for entry in snapshot["device_traces"][0]:
        action = entry["action"]
        if action == "alloc":
            ids[entry["addr"]] = alloc
            events.append(f"a {entry['size']} {entry.get('stream', 0)}")
            alloc += 1
        elif action == "free_completed" and entry["addr"] in ids:
            events.append(f"f {ids.pop(entry['addr'])}")
    with open(args.real_trace, "w") as out:
        out.write(colo_profile.TRACE_HEADER + "\n# source torch.cuda.memory history\n")
        out.write("\n".join(events) + "\n")
    print(json.dumps({
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "end_reserved_bytes": torch.cuda.memory_reserved(),
        "seconds": round(seconds, 3),
        "real_events": len(events),
        "history_complete": len(snapshot["device_traces"][0]) < 2_000_000,
    }))


# ----------------------------------------------------------------------------------------------
# The harness (parent)


class Poller(threading.Thread):
    """Polls NVML for every compute process's memory and keeps each pid's peak."""

    def __init__(self, interval=0.002):
        super().__init__(daemon=True)
        from colo_calibrate import Nvml

        self.nvml = Nvml()
        # Every GPU: runs pinned to any of them (CUDA_VISIBLE_DEVICES) are seen by their pid.
        self.handles = []
        for index in range(64):
            try:
                self.handles.append(self.nvml.handle(index))
            except RuntimeError:
                break
        self.interval = interval
        self.peaks = {}
        self.polls = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                for handle in self.handles:
                    for pid, used in self.nvml.process_memory(handle).items():
                        if used > self.peaks.get(pid, 0):
                            self.peaks[pid] = used
                self.polls += 1
            except RuntimeError:
                pass
            time.sleep(self.interval)


def run_child(cmd, timeout):
    """Runs `cmd`, killing it after `timeout` seconds; returns (pid, returncode, stdout, stderr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    return proc.pid, proc.returncode, stdout, stderr


def model_args(amp, seq):
    return (["--amp"] if amp else []) + (["--seq-len", str(seq)] if seq else [])


def profile_case(case, out_dir, poller):
    target, batch, optimizer, amp, seq = case
    cid = case_id(*case)
    path = os.path.join(out_dir, "cases", cid + ".json")
    if os.path.exists(path):
        return {"id": cid, "profile": "cached"}
    cmd = [sys.executable, os.path.join(TOOLS, "colo_profile.py")]
    if target.startswith("step:"):
        cmd += ["--step", target[len("step:"):], "--batch", str(batch)]
    else:
        target, task = split_task(target)
        cmd += [target, "--batch", str(batch), "--optimizer", optimizer] + model_args(amp, seq)
        cmd += ["--task", task] if task else []
    cmd += ["--steps", str(PROFILE_STEPS), "-o", path]
    started = time.monotonic()
    pid, rc, _, stderr = run_child(cmd, 600)
    # The profiler allocates nothing on the GPU, but with one visible torch creates a CUDA context
    # for fake CUDA tensors: recorded, so the README can say how much.
    result = {"id": cid, "profile_rc": rc,
              "profile_wall_seconds": round(time.monotonic() - started, 2),
              "profile_gpu_bytes": poller.peaks.get(pid, 0)}
    if rc != 0:
        result["profile_error"] = stderr[-1500:]
    return result


def real_case(case, out_dir, poller, snapshot_match=None):
    target, batch, optimizer, amp, seq = case
    cid = case_id(*case)
    cmd = [sys.executable, os.path.abspath(__file__), "--run-case", "--target", target,
           "--batch", str(batch), "--optimizer", optimizer,
           "--real-trace", os.path.join(out_dir, "real", cid + ".trace")] + model_args(amp, seq)
    if snapshot_match and snapshot_match in cid:
        cmd += ["--snapshot", os.path.join(out_dir, "real", cid + ".snapshot.pickle")]
    pid, rc, stdout, stderr = run_child(cmd, 300)
    result = {"id": cid, "target": target, "batch": batch, "optimizer": optimizer, "amp": amp,
              "seq_len": seq, "run_rc": rc, "nvml_peak_bytes": poller.peaks.get(pid)}
    if rc == 0:
        result.update(json.loads(stdout.strip().splitlines()[-1]))
    else:
        result["run_error"] = stderr[-1500:]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--cases", default="all", choices=["all", "smoke", "heldout", "user", "unseen"])
    parser.add_argument("--shard", help="K/N: only the cases K, K+N, ... of the list (0-based)")
    parser.add_argument("--snapshot-match",
                        help="also keep torch's memory snapshot, with each allocation's stack, of "
                             "the runs whose id contains this (for finding what a profile misses)")
    parser.add_argument("--profile-jobs", type=int, default=12)
    parser.add_argument("--run-jobs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=540)
    parser.add_argument("--only", choices=["profile", "run"], help="one phase only")
    parser.add_argument("--match", help="only the cases whose id contains this")
    # The child's arguments.
    parser.add_argument("--run-case", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--optimizer")
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--seq-len", type=int)
    parser.add_argument("--real-trace")
    parser.add_argument("--snapshot")
    args = parser.parse_args()
    if args.run_case:
        return run_case(args)

    deadline = time.time() + args.seconds
    out = args.out
    for sub in ("cases", "real"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    results_path = os.path.join(out, "results.jsonl")
    finished = set()
    if os.path.exists(results_path):
        with open(results_path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        finished = {r["id"] for r in rows if r.get("run_rc") == 0 and r.get("profile_rc") in (0, None)}
    todo = [c for c in cases(args.cases) if case_id(*c) not in finished
            and (not args.match or args.match in case_id(*c))]
    if args.shard:
        k, n = (int(v) for v in args.shard.split("/"))
        todo = [c for i, c in enumerate(cases(args.cases)) if i % n == k and c in todo]
    print(f"{len(todo)} cases to do", flush=True)

    poller = Poller()
    poller.start()
    profiles = {}
    if args.only != "run":
        with concurrent.futures.ThreadPoolExecutor(args.profile_jobs) as pool:
            for r in pool.map(lambda c: profile_case(c, out, poller), todo):
                profiles[r["id"]] = r
                print("profiled", r["id"], r.get("profile_rc", "cached"),
                      r.get("profile_wall_seconds", ""), flush=True)
    if args.only == "profile":
        return 0

    lock = threading.Lock()

    def one(case):
        if time.time() > deadline:
            return
        r = real_case(case, out, poller, args.snapshot_match)
        r.update(profiles.get(r["id"], {}))
        with lock, open(results_path, "a") as f:
            f.write(json.dumps(r) + "\n")
        print("ran", r["id"], r["run_rc"], r.get("nvml_peak_bytes"), r.get("peak_reserved_bytes"),
              flush=True)

    with concurrent.futures.ThreadPoolExecutor(args.run_jobs) as pool:
        list(pool.map(one, todo))
    poller.stop.set()
    print(f"NVML polls: {poller.polls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
