#!/usr/bin/env python3
"""The driver of bench/slurm-overhead/run.sh: submits batch jobs to a running test cluster
(tests/slurm/cluster.sh, colo's SPANK plugin loaded) and measures, for each, the time from just
before `sbatch` to the job's first output line (the job prints `date +%s.%N` and exits).

    bench.py DIR OUT [--jobs 200] [--wave 10] [--colo-options "--colo-mem=4GiB --colo-share=mps"]
             [--busy]

Jobs go in waves of --wave at once, as colo-alice; a wave ends when all its jobs have ended in
Slurm. Waves alternate between the two kinds in the order plain, colo, colo, plain, ... so that
drift (load, Slurm's state) reaches both alike. Writes OUT/jobs.csv (one line per job) and
OUT/summary.json, and prints a summary. --busy: first every GPU gets a job of colo-bob's that
holds it throughout (--gres=shard:40, one per GPU), so that every measured job lands on a GPU
that runs another job. Then checks, through each node's colod, that colod had a
job for every colo job and for no plain one.
"""

import argparse
import csv
import json
import os
import pwd
import re
import shlex
import statistics
import subprocess
import sys
import time

USER = "colo-alice"
NODES = ("n1", "n2", "n3")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLO = os.environ.get("COLO_BIN") or os.path.join(SOURCE_DIR, "build", "bin", "colo")
JOB_DEADLINE = 120  # seconds, for a wave to end
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def env(conf):
    return {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "SLURM_CONF": conf}


def percentile(values, p):
    """The nearest-rank percentile (p in 0..100) of `values`."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))  # ceil
    return ordered[min(len(ordered), int(rank)) - 1]


def stats(values):
    return {"n": len(values), "min": min(values), "p50": percentile(values, 50),
            "p90": percentile(values, 90), "p99": percentile(values, 99), "max": max(values),
            "mean": statistics.fmean(values)}


def differences(rows, value, resamples=2000):
    """colo minus plain of `value` over `rows`, for mean, p50, p90, p99: (difference, low,
    high), low..high the 95% interval of a bootstrap (jobs resampled within each kind)."""
    import random
    rng = random.Random(1)
    plain = [value(r) for r in rows if r["kind"] == "plain"]
    colo = [value(r) for r in rows if r["kind"] == "colo"]
    measures = {"mean": statistics.fmean, "p50": lambda v: percentile(v, 50),
                "p90": lambda v: percentile(v, 90), "p99": lambda v: percentile(v, 99)}
    result = {}
    for key, f in measures.items():
        samples = sorted(f(rng.choices(colo, k=len(colo))) - f(rng.choices(plain, k=len(plain)))
                         for _ in range(resamples))
        result[key] = (f(colo) - f(plain), samples[int(0.025 * resamples)],
                       samples[int(0.975 * resamples) - 1])
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("out")
    parser.add_argument("--jobs", type=int, default=200, help="jobs of each kind")
    parser.add_argument("--wave", type=int, default=10, help="jobs submitted at once")
    parser.add_argument("--colo-options", default="--colo-mem=4GiB --colo-share=mps")
    parser.add_argument("--busy", action="store_true",
                        help="every GPU runs a job of another user's throughout")
    parser.add_argument("--plain-only", action="store_true",
                        help="only jobs without colo options (a cluster without the plugin)")
    args = parser.parse_args()

    conf = os.path.join(args.dir, "slurm.conf")
    work = os.path.join(args.dir, "work", USER)
    out_dir = os.path.join(work, "bench-out")
    os.makedirs(args.out, exist_ok=True)
    pw = pwd.getpwnam(USER)
    os.makedirs(out_dir, exist_ok=True)
    os.chown(out_dir, pw.pw_uid, pw.pw_gid)
    script = os.path.join(work, "first-line.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\ndate +%s.%N\n")
    os.chown(script, pw.pw_uid, pw.pw_gid)
    os.chmod(script, 0o755)

    busy = []
    if args.busy:
        # Two per node of 40 of a GPU's 78 shards each: Slurm puts them on different GPUs.
        for node in NODES:
            for _ in range(2):
                argv = ["runuser", "-u", "colo-bob", "--", "env"] + \
                       [f"{k}={v}" for k, v in env(conf).items()] + \
                       ["sbatch", "--parsable", "-o", "/dev/null", "--gres=shard:40", "-w", node,
                        "--wrap", "sleep 3600"]
                result = subprocess.run(argv, env=env(conf), cwd="/", capture_output=True,
                                        text=True, stdin=subprocess.DEVNULL)
                if result.returncode != 0:
                    sys.exit(f"sbatch of a busy job failed: {result.stderr}")
                busy.append(result.stdout.strip().split(";")[0])
        end = time.monotonic() + JOB_DEADLINE
        while True:
            result = subprocess.run(["squeue", "-h", "-j", ",".join(busy), "-o", "%T"],
                                    env=env(conf), capture_output=True, text=True)
            if result.stdout.split().count("RUNNING") == len(busy):
                break
            if time.monotonic() > end:
                sys.exit(f"the busy jobs did not all start: {result.stdout}")
            time.sleep(0.2)
        time.sleep(2)  # past their placement (a launch grace would start with it)

    kinds = {"plain": [], "colo": shlex.split(args.colo_options)}
    waves_per_kind = -(-args.jobs // args.wave)
    order = []
    for i in range(waves_per_kind):  # plain colo colo plain plain colo ...
        order += ["plain", "colo"] if i % 2 == 0 else ["colo", "plain"]
    if args.plain_only:
        order = [k for k in order if k == "plain"]
    measured = ("plain",) if args.plain_only else ("plain", "colo")

    rows = []
    started = time.monotonic()
    for number, kind in enumerate(order):
        done = sum(1 for r in rows if r["kind"] == kind)
        count = min(args.wave, args.jobs - done)
        procs = []
        for _ in range(count):
            argv = ["runuser", "-u", USER, "--", "env"] + \
                   [f"{k}={v}" for k, v in env(conf).items()] + \
                   ["sbatch", "--parsable", "-o", os.path.join(out_dir, "%j.out")] + \
                   kinds[kind] + [script]
            submitted = time.time()
            proc = subprocess.Popen(argv, env=env(conf), cwd=work, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
            procs.append((submitted, proc))
        wave = []
        for submitted, proc in procs:
            stdout, stderr = proc.communicate(timeout=60)
            if proc.returncode != 0:
                sys.exit(f"sbatch failed ({proc.returncode}): {stdout}{stderr}")
            job = int(stdout.strip().split(";")[0])
            wave.append({"job": job, "kind": kind, "wave": number, "submitted": submitted,
                         "sbatch_returned": None})
        # Wait until every job of the wave has ended in Slurm, then read the first lines.
        ids = ",".join(str(r["job"]) for r in wave)
        end = time.monotonic() + JOB_DEADLINE
        while True:
            result = subprocess.run(["squeue", "-h", "-t", "all", "-j", ids, "-o", "%i %T %N"],
                                    env=env(conf), capture_output=True, text=True)
            states = {}
            for line in result.stdout.splitlines():
                parts = line.split()
                if len(parts) >= 2:
                    states[int(parts[0])] = (parts[1], parts[2] if len(parts) > 2 else "")
            if len(states) == len(wave) and all(s[0] in FINISHED for s in states.values()):
                break
            if time.monotonic() > end:
                sys.exit(f"wave {number} did not end within {JOB_DEADLINE} s: {states}")
            time.sleep(0.1)
        for r in wave:
            r["state"], r["node"] = states[r["job"]]
            path = os.path.join(out_dir, f"{r['job']}.out")
            first = ""
            try:
                with open(path) as f:
                    first = f.readline().strip()
            except OSError:
                pass
            if r["state"] != "COMPLETED" or not re.fullmatch(r"\d+\.\d+", first):
                with open(path, errors="replace") if os.path.exists(path) else open(os.devnull) as f:
                    text = f.read()
                sys.exit(f"job {r['job']} ({kind}) {r['state']}, output: {text!r}")
            r["first_line"] = float(first)
            r["latency_ms"] = (r["first_line"] - r["submitted"]) * 1000
            rows.append(r)
        sys.stdout.write(f"\rwave {number + 1}/{len(order)} ({kind})   ")
        sys.stdout.flush()
    elapsed = time.monotonic() - started
    print(f"\n{len(rows)} jobs in {elapsed:.0f} s")
    if busy:
        subprocess.run(["scancel"] + busy, env=env(conf), check=False)

    # slurmd's word of when it launched each batch job (its log's ms timestamps): the part of the
    # latency that is Slurm's before slurmstepd (and colo's plugin) runs.
    launched = {}
    for node in NODES:
        log = os.path.join(args.dir, "nodes", node, "slurmd.log")
        with open(log, errors="replace") as f:
            for line in f:
                m = re.match(r"\[(\S+)\] .*Launching batch job (\d+) ", line)
                if m:
                    t = time.mktime(time.strptime(m.group(1)[:19], "%Y-%m-%dT%H:%M:%S")) + \
                        float("0" + m.group(1)[19:])
                    launched[int(m.group(2))] = t
    # colod's record of each tenant (when it placed it): the part that is colo's.
    placed = {}
    in_colod = {}
    colod_jobs = set()
    for node in NODES:
        socket = f"/run/colo-slurm/{node}.sock"
        result = subprocess.run([COLO, "--socket", socket, "history", "--all", "--limit", "100000",
                                 "--json"], capture_output=True, text=True)
        reply = json.loads(result.stdout)
        if "next" in reply:
            print(f"note: {node}'s colod has more history than one page (200 jobs)")
        for j in reply.get("jobs", []):
            if j.get("slurm_job") is not None:
                colod_jobs.add(int(j["slurm_job"]))
                if j.get("started"):
                    placed[int(j["slurm_job"])] = float(j["started"])
                # colod's own time to take the job in: its "submitted" event (the step's
                # first ask) to its "placed" event.
                shown = subprocess.run([COLO, "--socket", socket, "show", str(j["id"]), "--json"],
                                       capture_output=True, text=True)
                try:
                    events = json.loads(shown.stdout).get("job", {}).get("events", [])
                except ValueError:
                    events = []
                times = {e.get("kind"): e.get("time") for e in events}
                placed_at = times.get("started") or times.get("placed")  # older colods: "placed"
                if times.get("submitted") and placed_at:
                    in_colod[int(j["slurm_job"])] = (placed_at - times["submitted"]) * 1000
        result = subprocess.run([COLO, "--socket", socket, "queue", "--json"], capture_output=True,
                                text=True)
        for j in json.loads(result.stdout).get("jobs", []):
            if j.get("slurm_job") is not None:
                colod_jobs.add(int(j["slurm_job"]))
    for r in rows:
        r["slurmd_launch_ms"] = ((launched[r["job"]] - r["submitted"]) * 1000
                                 if r["job"] in launched else None)
        r["colod_placed_ms"] = ((placed[r["job"]] - r["submitted"]) * 1000
                                if r["job"] in placed else None)
        r["colod_ask_to_placed_ms"] = in_colod.get(r["job"])
    plain_ids = {r["job"] for r in rows if r["kind"] == "plain"}
    colo_ids = {r["job"] for r in rows if r["kind"] == "colo"}
    check = {"colod_jobs": len(colod_jobs),
             "plain_jobs_colod_knows": sorted(plain_ids & colod_jobs),
             "colo_jobs_colod_does_not_know": sorted(colo_ids - colod_jobs)}
    # colod's logs: no line naming a plain job.
    plain_in_logs = set()
    for node in NODES:
        with open(os.path.join(args.dir, "colo", node, "colod.log"), errors="replace") as f:
            for line in f:
                for m in re.finditer(r"[Ss]lurm job (\d+)", line):
                    if int(m.group(1)) in plain_ids:
                        plain_in_logs.add(int(m.group(1)))
    check["plain_jobs_in_colod_logs"] = sorted(plain_in_logs)

    with open(os.path.join(args.out, "jobs.csv"), "w", newline="") as f:
        fields = ["job", "kind", "wave", "node", "state", "submitted", "first_line", "latency_ms",
                  "slurmd_launch_ms", "colod_placed_ms", "colod_ask_to_placed_ms"]
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()})

    summary = {"jobs_per_kind": args.jobs, "wave": args.wave, "colo_options": args.colo_options,
               "busy": args.busy,
               "elapsed_s": elapsed, "check": check}
    for kind in measured:
        mine = [r for r in rows if r["kind"] == kind]
        summary[kind] = {"latency_ms": stats([r["latency_ms"] for r in mine])}
        launch = [r["slurmd_launch_ms"] for r in mine if r["slurmd_launch_ms"] is not None]
        if launch:
            summary[kind]["slurmd_launch_ms"] = stats(launch)
            summary[kind]["launch_to_first_line_ms"] = stats(
                [r["latency_ms"] - r["slurmd_launch_ms"] for r in mine
                 if r["slurmd_launch_ms"] is not None])
        if kind == "colo":
            gaps = [r["colod_placed_ms"] - r["slurmd_launch_ms"] for r in mine
                    if r["colod_placed_ms"] is not None and r["slurmd_launch_ms"] is not None]
            asked = [r["colod_ask_to_placed_ms"] for r in mine
                     if r["colod_ask_to_placed_ms"] is not None]
            if asked:
                summary[kind]["colod_ask_to_placed_ms"] = stats(asked)
            if gaps:
                summary[kind]["launch_to_colod_placed_ms"] = stats(gaps)
                summary[kind]["colod_placed_to_first_line_ms"] = stats(
                    [r["latency_ms"] - r["colod_placed_ms"] for r in mine
                     if r["colod_placed_ms"] is not None])
        summary[kind]["nodes"] = {n: sum(1 for r in mine if r["node"] == n) for n in NODES}
    if not args.plain_only:
        summary["colo_adds_ms"] = {
            "latency_ms": differences(rows, lambda r: r["latency_ms"]),
            "launch_to_first_line_ms": differences(
                [r for r in rows if r["slurmd_launch_ms"] is not None],
                lambda r: r["latency_ms"] - r["slurmd_launch_ms"]),
        }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    def line(name, s):
        return (f"  {name:<28} p50 {s['p50']:7.1f}  p90 {s['p90']:7.1f}  p99 {s['p99']:7.1f}  "
                f"max {s['max']:7.1f}  mean {s['mean']:7.1f}  (n={s['n']})")
    for kind in measured:
        print(f"{kind} ({'no colo options' if kind == 'plain' else args.colo_options}), ms:")
        for key, s in summary[kind].items():
            if isinstance(s, dict) and "p50" in s:
                print(line(key, s))
        print(f"  nodes: {summary[kind]['nodes']}")
    for name, d in summary.get("colo_adds_ms", {}).items():
        print(f"colo adds ({name}; 95% bootstrap interval):")
        for key in ("mean", "p50", "p90", "p99"):
            v, lo, hi = d[key]
            print(f"  {key:<5} {v:+7.1f} ms  [{lo:+7.1f}, {hi:+7.1f}]")
    print(f"colod check: {json.dumps(check)}")
    bad = check["plain_jobs_colod_knows"] or check["colo_jobs_colod_does_not_know"] or \
        check["plain_jobs_in_colod_logs"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
