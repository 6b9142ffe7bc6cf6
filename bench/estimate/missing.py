#!/usr/bin/env python3
"""What a real training run allocates that its profile does not: per step, the sizes torch's own
allocation history holds more (or fewer) of than colo-profile's trace; and the replay again with
given workspaces added after the depthwise convolutions' backward, to see how much of the gap they
are.

    missing.py REAL.trace PROFILE.json [--real-steps 8] [--depthwise-workspace GROUPS=BYTES]...

REAL.trace is bench/estimate/evaluate.py's record of the real run (results-*/real/ID.trace, in the
cases-and-traces archives), PROFILE.json the case's profile. Standard library only, and colo.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MIB = 2 ** 20


def allocations(path, steps_only):
    sizes, started = [], not steps_only
    for line in open(path):
        fields = line.split()
        if fields[:2] == ["m", "steps"]:
            started = True
        elif fields and fields[0] == "a" and started:
            sizes.append(int(fields[1]))
    return sizes


def with_workspaces(trace, out, workspaces):
    """The trace with an allocation and free of workspaces[GROUPS] after every backward of a
    depthwise 7x7 convolution of that many channels; later allocations renumbered."""
    lines, old, new, remap, added = [], 0, 0, {}, 0
    for line in open(trace):
        fields = line.split()
        if fields and fields[0] == "a":
            remap[old] = new
            old, new = old + 1, new + 1
        elif fields and fields[0] == "f":
            line = f"f {remap[int(fields[1])]}\n"
        lines.append(line)
        if fields[:2] == ["w", "conv_bwd"] and len(fields) >= 9:
            kernel, channels, groups = int(fields[5]), int(fields[7]), int(fields[8])
            if kernel == 7 and channels == groups and groups in workspaces:
                lines += [f"a {workspaces[groups]}\n", f"f {new}\n"]
                new, added = new + 1, added + 1
    with open(out, "w") as f:
        f.writelines(lines)
    return added


def estimate(colo, summary, gpu):
    out = subprocess.run([colo, "estimate", summary, "--estimator", "trace", "--gpu", gpu, "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["estimates"][0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("real")
    parser.add_argument("profile")
    parser.add_argument("--real-steps", type=int, default=8)
    parser.add_argument("--depthwise-workspace", action="append", default=[], metavar="GROUPS=BYTES")
    parser.add_argument("--colo", default=os.path.join(ROOT, "build", "bin", "colo"))
    parser.add_argument("--gpu", default="H100")
    args = parser.parse_args()
    with open(args.profile) as f:
        summary = json.load(f)
    trace = os.path.join(os.path.dirname(os.path.abspath(args.profile)), summary["traces"][0]["file"])
    steps = summary["traces"][0].get("steps") or 3
    real, profiled = collections.Counter(allocations(args.real, False)), collections.Counter(allocations(trace, True))
    print(f"per step: the real run {sum(real.values()) / args.real_steps:.0f} allocations, "
          f"the profile {sum(profiled.values()) / steps:.0f}")
    rows = [(size, real[size] / args.real_steps - profiled[size] / steps) for size in set(real) | set(profiled)]
    rows = sorted((r for r in rows if abs(r[1]) >= 0.5), key=lambda r: -abs(r[0] * r[1]))
    for size, more in rows[:20]:
        print(f"  {size:>12} B {size / MIB:9.3f} MiB: {more:+6.2f} per step in the real run")
    if args.depthwise_workspace:
        workspaces = {int(g): int(b) for g, b in (w.split("=") for w in args.depthwise_workspace)}
        work = tempfile.mkdtemp(prefix="colo-missing-")
        copy = os.path.join(work, os.path.basename(args.profile))
        shutil.copy(args.profile, copy)
        added = with_workspaces(trace, os.path.join(work, summary["traces"][0]["file"]), workspaces)
        before, after = estimate(args.colo, args.profile, args.gpu), estimate(args.colo, copy, args.gpu)
        print(f"with {added} depthwise workspaces: estimate {before['peak'] / MIB:.0f} -> "
              f"{after['peak'] / MIB:.0f} MiB, upper bound {before['upper'] / MIB:.0f} -> {after['upper'] / MIB:.0f} MiB")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
