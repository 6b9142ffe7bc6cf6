#!/usr/bin/env python3
"""The driver of bench/slurm-mixed/run.sh: the 36-job mixed workload on a running test cluster
(tests/slurm/cluster.sh), as colo jobs (--colo-mem) or as Slurm's own shard jobs (--gres=shard).

    bench.py DIR OUT --kind colo|shard [--seed 1] [--label NAME]

The jobs: 3 x {2, 4, 6, 8, 12, 16, 20, 24, 30, 40, 48, 60} GiB, shuffled, alternately colo-alice's
and colo-bob's, each holding its GPU 20-50 s (the same needs, order and durations for both kinds,
from --seed), all submitted at once. Each job prints when it started and ended, its node and the
GPU Slurm gave it (`scontrol show job -d`, after its first line). Measured:

- makespan: the last job's end minus the first submission;
- held on the node before the job ran: per job, its first line minus slurmd's "Launching batch job"
  (its log's ms time stamps): the time Slurm had the job RUNNING (its CPUs and time limit taken)
  before the job itself ran. For colo jobs also colod's own wait, its "submitted" event (the step's
  ask) to its "placed" event, and whether colod ever gave a job back to Slurm (requeues);
- no GPU over-committed: at every job's start, the needs of the jobs on its GPU sum to at most the
  GPU's shards (78 GiB of an 80 GiB GPU);
- the makespan split along its critical path (critical_path below): where two runs' makespans
  differ, which part of the chain of jobs that set them moved.

Writes OUT/LABEL.jobs.csv and OUT/LABEL.summary.json, and prints a summary.
"""

import argparse
import csv
import json
import os
import pwd
import random
import re
import subprocess
import sys
import time

NODES = ("n1", "n2", "n3")
USERS = ("colo-alice", "colo-bob")
NEEDS_GIB = (2, 4, 6, 8, 12, 16, 20, 24, 30, 40, 48, 60)
GPU_SHARDS = 78  # an 80 GiB GPU less colod's 2 GiB margin (cluster.sh)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLO = os.environ.get("COLO_BIN") or os.path.join(SOURCE_DIR, "build", "bin", "colo")
DEADLINE = 900  # seconds, for the workload to end
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
SCRIPT = """#!/bin/sh
echo "start $(date +%s.%N) node=$(hostname) gpus=$CUDA_VISIBLE_DEVICES"
echo "gpu=$(scontrol show job -d "$SLURM_JOB_ID" | sed -n 's/.*(IDX:\\([0-9,-]*\\)).*/\\1/p' | head -1)"
sleep "$1"
echo "end $(date +%s.%N)"
"""


def env(conf):
    return {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "SLURM_CONF": conf}


def workload(seed):
    """[(need GiB, seconds, user)] in submission order."""
    rng = random.Random(seed)
    needs = list(NEEDS_GIB) * 3
    rng.shuffle(needs)
    return [(need, rng.randint(20, 50), USERS[i % 2]) for i, need in enumerate(needs)]


def slurmd_launches(cluster_dir):
    launched = {}
    for node in NODES:
        with open(os.path.join(cluster_dir, "nodes", node, "slurmd.log"), errors="replace") as f:
            for line in f:
                m = re.match(r"\[(\S+)\] .*Launching batch job (\d+) ", line)
                if m:
                    stamp = m.group(1)
                    launched[int(m.group(2))] = time.mktime(
                        time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + stamp[19:])
    return launched


def colod_waits():
    """{Slurm job: (colod's submitted -> placed in s, requeued here)} from every node's colod."""
    waits = {}
    for node in NODES:
        socket = f"/run/colo-slurm/{node}.sock"
        listed = subprocess.run([COLO, "--socket", socket, "history", "--all", "--limit", "1000",
                                 "--json"], capture_output=True, text=True)
        for j in json.loads(listed.stdout or "{}").get("jobs", []):
            if j.get("slurm_job") is None:
                continue
            shown = subprocess.run([COLO, "--socket", socket, "show", str(j["id"]), "--json"],
                                   capture_output=True, text=True)
            try:
                events = json.loads(shown.stdout).get("job", {}).get("events", [])
            except ValueError:
                events = []
            times = {e.get("kind"): e.get("time") for e in events}
            waited = None
            started = times.get("started") or times.get("placed")
            if times.get("submitted") and started:
                waited = started - times["submitted"]
            requeued = any(e.get("kind") == "requeued" for e in events) or \
                j.get("state") == "requeued"
            slurm_job = int(j["slurm_job"])
            previous = waits.get(slurm_job, (0.0, False))
            waits[slurm_job] = ((waited or 0.0) + previous[0], requeued or previous[1])
    return waits


def critical_path(rows, first_submit):
    """The chain of jobs that set the makespan, from the last to end backwards: each job's
    predecessor is the job whose end came last before its launch (the end that let Slurm start
    it); a job launched before any end starts the chain. The makespan split along it (s): the
    chain's first job submitted after the first submission, its submission to its launch (Slurm's
    scheduling), each end to the next job's launch (the batch script's exit, slurmstepd, the epilog,
    slurmctld's next pass, the next job's prolog), each launch to the job's first line (the node:
    slurmstepd, and colo's plugin and colod for colo jobs) and each job's run (first to last line)."""
    chain = [max(rows, key=lambda r: r["end"])]
    while True:
        before = [r for r in rows if r["end"] < chain[-1]["launched"]]
        if not before:
            break
        chain.append(max(before, key=lambda r: r["end"]))
    chain.reverse()
    first = chain[0]
    split = {
        "jobs": [r["job"] for r in chain],
        "submitted_after_first": first["submitted"] - first_submit,
        "submit_to_launch": first["launched"] - first["submitted"],
        "end_to_next_launch": sum(b["launched"] - a["end"] for a, b in zip(chain, chain[1:])),
        "launch_to_first_line": sum(r["start"] - r["launched"] for r in chain),
        "runs": sum(r["end"] - r["start"] for r in chain),
    }
    return split


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("out")
    parser.add_argument("--kind", choices=("colo", "shard"), required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--label", default=None)
    args = parser.parse_args()
    label = args.label or args.kind

    conf = os.path.join(args.dir, "slurm.conf")
    os.makedirs(args.out, exist_ok=True)
    scripts = {}
    for user in USERS:
        work = os.path.join(args.dir, "work", user)
        pw = pwd.getpwnam(user)
        path = os.path.join(work, "mixed.sh")
        with open(path, "w") as f:
            f.write(SCRIPT)
        os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(path, 0o755)
        out_dir = os.path.join(work, "mixed-out")
        os.makedirs(out_dir, exist_ok=True)
        os.chown(out_dir, pw.pw_uid, pw.pw_gid)
        scripts[user] = (work, path, out_dir)

    rows = []
    first_submit = time.time()
    for need, seconds, user in workload(args.seed):
        work, script, out_dir = scripts[user]
        options = [f"--colo-mem={need}GiB"] if args.kind == "colo" else [f"--gres=shard:{need}"]
        argv = ["runuser", "-u", user, "--", "env"] + [f"{k}={v}" for k, v in env(conf).items()] + \
            ["sbatch", "--parsable", "--open-mode=append", "-o", os.path.join(out_dir, "%j.out")] + \
            options + [script, str(seconds)]
        submitted = time.time()
        result = subprocess.run(argv, env=env(conf), cwd=work, capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=60)
        if result.returncode != 0:
            sys.exit(f"sbatch failed: {result.stdout}{result.stderr}")
        rows.append({"job": int(result.stdout.strip().split(";")[0]), "need_gib": need,
                     "seconds": seconds, "user": user, "submitted": submitted,
                     "out": os.path.join(out_dir, result.stdout.strip().split(";")[0] + ".out")})

    ids = ",".join(str(r["job"]) for r in rows)
    end = time.monotonic() + DEADLINE
    most_running = 0
    while True:
        listed = subprocess.run(["squeue", "-h", "-t", "all", "-j", ids, "-o", "%i %T %N"],
                                env=env(conf), capture_output=True, text=True)
        states = {}
        for line in listed.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2:
                states[int(parts[0])] = (parts[1], parts[2] if len(parts) > 2 else "")
        most_running = max(most_running, sum(s[0] == "RUNNING" for s in states.values()))
        if len(states) == len(rows) and all(s[0] in FINISHED for s in states.values()):
            break
        if time.monotonic() > end:
            sys.exit(f"the workload did not end within {DEADLINE} s: {states}")
        time.sleep(0.5)

    launched = slurmd_launches(args.dir)
    waits = colod_waits() if args.kind == "colo" else {}
    restarts = {}
    listed = subprocess.run(["squeue", "-h", "-t", "all", "-j", ids, "-O", "JobID:|,RestartCnt:|"],
                            env=env(conf), capture_output=True, text=True)
    for line in listed.stdout.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 2 and parts[0].isdigit():
            restarts[int(parts[0])] = int(parts[1] or 0)
    for r in rows:
        r["state"], r["node"] = states[r["job"]]
        with open(r["out"], errors="replace") as f:
            text = f.read()
        starts = re.findall(r"^start (\S+) node=(\S+) ", text, re.M)
        gpus = re.findall(r"^gpu=(\S*)$", text, re.M)
        ends = re.findall(r"^end (\S+)", text, re.M)
        if r["state"] != "COMPLETED" or not starts or not ends:
            sys.exit(f"job {r['job']} {r['state']}: {text!r}")
        r["start"], r["run_node"] = float(starts[-1][0]), starts[-1][1]
        r["gpu"] = gpus[-1] if gpus else ""  # Slurm's index of the job's GPU on its node
        r["end"] = float(ends[-1])
        r["runs"] = len(starts)
        r["restarts"] = restarts.get(r["job"], 0)
        r["launched"] = launched.get(r["job"])
        r["held_before_run_s"] = r["start"] - r["launched"] if r["launched"] else None
        r["colod_wait_s"], r["colod_requeued"] = waits.get(r["job"], (None, False))

    # No GPU over-committed: at each start, what runs on that GPU.
    overcommitted = []
    for r in rows:
        together = [o for o in rows if (o["run_node"], o["gpu"]) == (r["run_node"], r["gpu"]) and
                    o["start"] <= r["start"] < o["end"]]
        if sum(o["need_gib"] for o in together) > GPU_SHARDS:
            overcommitted.append((r["run_node"], r["gpu"], [o["job"] for o in together]))

    held = [r["held_before_run_s"] for r in rows if r["held_before_run_s"] is not None]
    summary = {
        "kind": args.kind, "seed": args.seed, "jobs": len(rows),
        "makespan_s": max(r["end"] for r in rows) - first_submit,
        "most_running_in_slurm": most_running,
        "held_before_run_s": {"sum": sum(held), "max": max(held), "n": len(held),
                              "over_1s": sum(1 for h in held if h > 1.0)},
        "requeued_jobs": sum(1 for r in rows if r["restarts"] > 0),
        "overcommitted": overcommitted,
        "jobs_per_node": {n: sum(1 for r in rows if r["run_node"] == n) for n in NODES},
    }
    if all(r["launched"] for r in rows):
        summary["critical_path_s"] = critical_path(rows, first_submit)
    if args.kind == "colo":
        waited = [r["colod_wait_s"] for r in rows if r["colod_wait_s"] is not None]
        summary["colod_submitted_to_placed_s"] = {
            "sum": sum(waited), "max": max(waited) if waited else None, "n": len(waited),
            "over_1s": sum(1 for w in waited if w > 1.0)}
        summary["colod_requeued_jobs"] = sum(1 for r in rows if r["colod_requeued"])
    with open(os.path.join(args.out, f"{label}.jobs.csv"), "w", newline="") as f:
        fields = ["job", "need_gib", "seconds", "user", "state", "run_node", "gpu", "submitted",
                  "launched", "start", "end", "runs", "restarts", "held_before_run_s",
                  "colod_wait_s"]
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()})
    with open(os.path.join(args.out, f"{label}.summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    return 1 if overcommitted else 0


if __name__ == "__main__":
    sys.exit(main())
