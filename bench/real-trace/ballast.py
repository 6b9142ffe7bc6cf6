#!/usr/bin/env python3
"""Holds GPU memory so that only LEAVE GiB stay free on every visible GPU, the way another
tenant's processes would: colod sees it as memory it does not manage, and a job that overflows what
is left really runs out of memory. Prints one JSON line when it holds the memory, then waits until
it is terminated.

    ballast.py --leave 16 [--ready FILE]

--ready writes the same JSON line to FILE once the memory is held (run.sh waits for it).
"""

import argparse
import json
import os
import signal
import sys
import time

import torch

GIB = 2 ** 30
CHUNK = GIB  # held in 1 GiB pieces (and a last smaller one), each its own cudaMalloc


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--leave", type=float, required=True, help="GiB to leave free per GPU")
    parser.add_argument("--ready")
    args = parser.parse_args()
    held, report = [], []
    for device in range(torch.cuda.device_count()):
        torch.cuda.set_device(device)
        torch.empty(1, device=device)  # the context first: it takes memory too
        free, total = torch.cuda.mem_get_info(device)
        want = free - int(args.leave * GIB)
        taken = 0
        while want - taken > 0:
            size = min(CHUNK, want - taken)
            held.append(torch.empty(size, dtype=torch.uint8, device=device))
            taken += size
        free_after, _ = torch.cuda.mem_get_info(device)
        report.append({"gpu": device, "total_bytes": total, "held_bytes": taken,
                       "free_bytes": free_after})
    line = json.dumps({"pid": os.getpid(), "leave_gib": args.leave, "gpus": report})
    print(line, flush=True)
    if args.ready:
        with open(args.ready + ".tmp", "w") as f:
            f.write(line + "\n")
        os.replace(args.ready + ".tmp", args.ready)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.2)
    sys.exit(0)


if __name__ == "__main__":
    main()
