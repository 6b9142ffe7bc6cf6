"""A real PyTorch training job on synthetic data, for colo's GPU proof and benchmarks.

Trains a torchvision model for a number of iterations on random inputs and prints one JSON line
with its speed and memory: the median iteration time is what collocation slows down.
"""
import argparse
import json
import os
import time

import torch
import torchvision

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="resnet18")
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--img", type=int, default=32)
parser.add_argument("--iters", type=int, default=2000)
parser.add_argument("--warmup", type=int, default=30)
parser.add_argument("--classes", type=int, default=100)
args = parser.parse_args()

torch.backends.cudnn.benchmark = True
model = getattr(torchvision.models, args.model)(num_classes=args.classes).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(args.batch, 3, args.img, args.img, device="cuda")
y = torch.randint(0, args.classes, (args.batch,), device="cuda")

times = []
started = time.time()
for i in range(args.warmup + args.iters):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    optimizer.step()
    torch.cuda.synchronize()
    if i >= args.warmup:
        times.append(time.perf_counter() - t0)
times.sort()
median = times[len(times) // 2]
print(json.dumps({
    "model": args.model, "batch": args.batch, "img": args.img, "iters": args.iters,
    "median_iter_ms": 1000 * median, "throughput_its": 1.0 / median,
    "wall_s": time.time() - started,
    "max_reserved_mib": torch.cuda.max_memory_reserved() / 2**20,
    "mps": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
    "thread_percent": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
    "mem_limit": os.environ.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
    "attempt": os.environ.get("COLO_ATTEMPT"),
}), flush=True)
