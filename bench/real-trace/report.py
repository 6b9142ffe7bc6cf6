#!/usr/bin/env python3
"""The real-trace benchmark's report: one table of every mode with ratios to exclusive, per-class
JCT, the simulator's prediction of each mode beside the measurement, and the GPU timelines (one SVG
per mode: each GPU's jobs as bars, its SM activity and its memory in use).

    report.py RESULTS_DIR [--trace trace-h200x2.json]

Reads RESULTS_DIR/result-MODE.json (drive.py) and RESULTS_DIR/sim*/comparison.json (sim_compare.py);
writes RESULTS_DIR/report.md and RESULTS_DIR/timeline-MODE.svg.
"""

import argparse
import json
import os
import statistics

MODES = ["exclusive", "round-robin", "round-robin-mps", "worst-fit", "least-utilized",
         "consolidate", "worst-fit-recovery", "worst-fit-oracle"]
LABEL = {"exclusive": "exclusive (whole GPUs)", "round-robin": "round-robin, plain sharing",
         "round-robin-mps": "round-robin, MPS, no estimate",
         "consolidate": "consolidate (MUG), MPS, colo's estimator",
         "worst-fit": "worst-fit (MAGM), MPS, colo's estimator",
         "least-utilized": "least-utilized (LUG), MPS, colo's estimator",
         "worst-fit-recovery": "worst-fit (MAGM), MPS, no estimate (OOM recovery only)",
         "worst-fit-oracle": "worst-fit (MAGM), MPS, oracle (each job's measured peak declared)"}
COLOR = {"light": "#7fb8e0", "medium": "#f2b36b", "heavy": "#d9625b"}


def timeline_svg(result, path):
    """Per GPU: a lane per concurrently running job (bars coloured by class, hatched start-up), then
    SM activity (filled) and memory in use (line, right axis) over the run."""
    records = result["records"]
    reports = {str(r["job"]): r for r in result.get("job_reports", [])}
    t0 = min(r["submitted"] for r in records)
    t1 = max(r["finished"] for r in records if r["finished"]) - t0
    gpus = result.get("gpus", 1)
    width, left, lane_h, chart_h = 960, 60, 9, 70
    x = lambda t: left + (width - left - 20) * t / t1
    lanes_per_gpu, placed = [], []
    for g in range(gpus):
        lanes = []  # end time of each lane's last bar
        for r in sorted(records, key=lambda r: r["last_start"] or 0):
            for a in r["attempts"]:
                if g not in (a["gpus"] or []) or a["started"] is None:
                    continue
                s, e = a["started"] - t0, (a["ended"] or t0 + t1) - t0
                lane = next((i for i, end in enumerate(lanes) if end <= s), None)
                if lane is None:
                    lanes.append(e)
                    lane = len(lanes) - 1
                lanes[lane] = e
                startup = reports.get(str(r["job"]), {}).get("startup_s", 0)
                placed.append((g, lane, s, e, startup, r, a))
        lanes_per_gpu.append(max(1, len(lanes)))
    panel = [lanes_per_gpu[g] * lane_h + chart_h + 40 for g in range(gpus)]
    height = sum(panel) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="10">',
           '<defs><pattern id="h" width="4" height="4" patternUnits="userSpaceOnUse">'
           '<path d="M0,4 l4,-4" stroke="#fff" stroke-width="1.2"/></pattern></defs>',
           f'<text x="{left}" y="12" font-size="12">{LABEL[result["mode"]]}: {result["total_s"]:.0f} s, '
           f'{result["energy_j"] / 1000:.0f} kJ (bars: jobs, hatched = start-up on the CPU; blue area: '
           f'SM activity; black line: memory in use)</text>']
    top = 20
    for g in range(gpus):
        lanes_top = top + 12
        out.append(f'<text x="4" y="{lanes_top + 8}">GPU {g}</text>')
        for (pg, lane, s, e, startup, r, a) in placed:
            if pg != g:
                continue
            y = lanes_top + lane * lane_h
            colour = COLOR.get(r["class"], "#999")
            if a["exit"] not in ("success", None):
                colour = "#555"
            title = (f'j{r["trace_id"]} {r["workload"]} ({r["gpus"]} GPU) {s:.0f}-{e:.0f} s '
                     f'{a["exit"]}')
            out.append(f'<rect x="{x(s):.1f}" y="{y}" width="{max(1, x(e) - x(s)):.1f}" '
                       f'height="{lane_h - 2}" fill="{colour}"><title>{title}</title></rect>')
            if startup:
                out.append(f'<rect x="{x(s):.1f}" y="{y}" width="{max(0, x(min(e, s + startup)) - x(s)):.1f}" '
                           f'height="{lane_h - 2}" fill="url(#h)"/>')
        base = lanes_top + lanes_per_gpu[g] * lane_h + 6 + chart_h
        samples = [(s["t"] - t0, s["gpus"][g]) for s in result["timeline"] if 0 <= s["t"] - t0 <= t1]
        # Memory in use beside what a ballast held, if one did.
        held = result["ballast"]["gpus"][g]["held_bytes"] if result.get("ballast") else 0
        if samples:
            pts = " ".join(f"{x(t):.1f},{base - chart_h * v['smact']:.1f}" for t, v in samples)
            out.append(f'<polygon points="{x(samples[0][0]):.1f},{base} {pts} '
                       f'{x(samples[-1][0]):.1f},{base}" fill="#9cc3e6" stroke="#3b78b5" stroke-width="0.6"/>')
            used = [(t, max(0, v["used_bytes"] - held)) for t, v in samples]
            top_mem = max(u for _, u in used) or 1
            scale = max(8, 8 * (1 + int(top_mem / 2**30 / 8)))
            mem = " ".join(f"{x(t):.1f},{base - chart_h * u / 2**30 / scale:.1f}" for t, u in used)
            out.append(f'<polyline points="{mem}" fill="none" stroke="#000" stroke-width="0.8"/>')
            out.append(f'<text x="{width - 200}" y="{base - chart_h + 8}">memory {scale} GiB'
                       f'{" beside the ballast" if held else ""}</text>')
        out.append(f'<line x1="{left}" y1="{base}" x2="{width - 20}" y2="{base}" stroke="#888"/>')
        out.append(f'<text x="4" y="{base - chart_h + 8}">SMACT 1</text>')
        for tick in range(0, int(t1) + 1, 60):
            out.append(f'<text x="{x(tick) - 6:.1f}" y="{base + 11}">{tick}s</text>')
        top += panel[g]
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results")
    parser.add_argument("--trace", default=os.path.join(os.path.dirname(__file__), "trace-h200x2.json"))
    args = parser.parse_args()
    runs = {}
    for m in MODES:
        path = os.path.join(args.results, f"result-{m}.json")
        if os.path.exists(path):
            with open(path) as f:
                runs[m] = json.load(f)
    with open(args.trace) as f:
        trace = json.load(f)["jobs"]
    base = runs["exclusive"]
    lines = ["# Real-trace benchmark: colo against exclusive allocation", ""]
    classes = {c: sum(1 for j in trace if j["class"] == c) for c in ("light", "medium", "heavy")}
    lines += [f"{len(trace)} jobs ({classes['light']} light, {classes['medium']} medium, "
              f"{classes['heavy']} heavy; {sum(1 for j in trace if j.get('gpus', 1) > 1)} on 2 GPUs), "
              f"arrivals over {max(j['arrival_s'] for j in trace):.0f} s, "
              f"{base['gpus']} GPU{'s' if base['gpus'] > 1 else ''}. Every mode ran colod for real (NVML, MPS, real processes).", ""]
    if base.get("ballast"):
        b = base["ballast"]
        lines[-2] += (f" Memory binds: through every mode a ballast process (`ballast.py`) held all but "
                      f"{b['leave_gib']:g} GiB of each GPU ({b['gpus'][0]['held_bytes'] / 2**30:.1f} GiB "
                      f"held), as another tenant's processes would; colod counts it as memory it does "
                      f"not manage, and a job that overflows what is left really crashes.")

    def ratio(m, key):
        return runs[m][key] / base[key] if base[key] else float("nan")

    lines += ["| mode | total time | avg JCT | avg wait | avg execution | energy | mean SMACT | "
              "OOM crashes | lost GPU-s | jobs done |", "|---|---|---|---|---|---|---|---|---|---|"]
    for m, r in runs.items():
        rel = lambda key: "" if m == "exclusive" else f" ({ratio(m, key):.2f}×)"
        lines.append(f"| {LABEL[m]} | {r['total_s']:.0f} s{rel('total_s')} | {r['avg_jct_s']:.0f} s"
                     f"{rel('avg_jct_s')} | {r['avg_wait_s']:.0f} s | {r['avg_exec_s']:.0f} s | "
                     f"{r['energy_j'] / 1000:.1f} kJ{rel('energy_j')} | {r['mean_smact']:.2f} | "
                     f"{r['oom_crashes']} | {r['lost_gpu_seconds']:.0f} | {r['succeeded']}/{r['jobs']} |")
    lines += ["", "Average JCT by class (s):", "", "| mode | light | medium | heavy | 2-GPU |",
              "|---|---|---|---|---|"]
    for m, r in runs.items():
        cells = []
        for pick in (lambda x: x["class"] == "light", lambda x: x["class"] == "medium",
                     lambda x: x["class"] == "heavy", lambda x: x["gpus"] > 1):
            v = [x["finished"] - x["submitted"] for x in r["records"] if pick(x) and x["finished"]]
            cells.append(f"{statistics.mean(v):.0f}" if v else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    for name, title in (("prediction-before/h200-ballast40",
                         "Predicted before the run (`sim_predict.py`, the prior catalogue: earlier "
                         "runs' iteration times, overheads and power fit)"),
                        ("sim", "The simulator's prediction (start-up phases, this GPU's power fit)"),
                        ("sim-before", "The simulator before this benchmark (whole run computing, "
                                       "the H100 power fit)")):
        path = os.path.join(args.results, name, "comparison.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            rows = json.load(f)
        ooms = all("oom_crashes" in row["measured"] for row in rows)
        lines += ["", f"{title}: `colo sim` on the same trace, measured / predicted:", "",
                  "| mode | total time | avg JCT | energy | mean SMACT |" + (" OOM crashes |" if ooms else ""),
                  "|---|---|---|---|---|" + ("---|" if ooms else "")]
        worst = 0
        for row in rows:
            cells = []
            for key, unit in (("total_s", "s"), ("avg_jct_s", "s"), ("energy_kj", "kJ")):
                mv, pv = row["measured"][key], row["predicted"][key]
                worst = max(worst, abs(pv - mv) / mv)
                cells.append(f"{mv:.0f} / {pv:.0f} {unit} ({100 * (pv - mv) / mv:+.0f}%)")
            cells.append(f"{row['measured']['mean_smact']:.2f} / {row['predicted']['mean_smact']:.2f}")
            if ooms:
                cells.append(f"{row['measured']['oom_crashes']} / {row['predicted']['oom_crashes']}")
            lines.append(f"| {row['mode']} | " + " | ".join(cells) + " |")
        same = all(sorted(rows, key=lambda r: r["measured"][k]) == sorted(rows, key=lambda r: r["predicted"][k])
                   for k in ("total_s", "avg_jct_s", "energy_kj"))
        lines += ["", f"Largest error {100 * worst:.0f}%; the ranking of the modes by every metric is "
                      f"{'the same' if same else 'not the same'} as measured."]
    # Single extra runs of worst-fit kept in folders of their own: what they show, and how the
    # simulator was asked about them.
    extras = [
        ("no-ballast", "Without the ballast (all of each GPU's memory left to the jobs; the "
         "ratio is to the exclusive run with the ballast, as exclusive without it was not run):",
         "worst-fit (MAGM), MPS, colo's estimator, no ballast", "Predicted before the run",
         "worst-fit, no ballast"),
        ("grace-5s", "Where the colo modes' waiting comes from: colod's launch grace (a GPU that just got "
         "a job takes no other for 10 s, so each GPU starts at most one job per 10 s, fewer than "
         "arrive). The simulator, asked first, predicted most of the wait would go with a 5 s "
         "grace; then measured (`LAUNCH_GRACE=5s`, `grace-5s/`):",
         "worst-fit, MPS, colo's estimator, 5 s grace", "Simulated before it ran", "worst-fit, 5 s grace"),
        ("estimate-at-submission", "Worst-fit before colod re-planned queued jobs from finished runs of "
         "the same model (each job planned with the estimate it was submitted with; "
         "`estimate-at-submission/`):",
         "worst-fit, MPS, colo's estimator at submission only", "Simulated (learn=off)",
         "worst-fit, estimates at submission"),
    ]
    images = []
    for folder, intro, label, simulated, caption in extras:
        path = os.path.join(args.results, folder, "result-worst-fit.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            r = json.load(f)
        lines += ["", intro, "",
                  "| mode | total time | avg JCT | avg wait | avg execution | energy | mean SMACT | OOM crashes | jobs done |",
                  "|---|---|---|---|---|---|---|---|---|",
                  f"| {label} | {r['total_s']:.0f} s "
                  f"({r['total_s'] / base['total_s']:.2f}×) | {r['avg_jct_s']:.0f} s "
                  f"({r['avg_jct_s'] / base['avg_jct_s']:.2f}×) | {r['avg_wait_s']:.0f} s | "
                  f"{r['avg_exec_s']:.0f} s | {r['energy_j'] / 1000:.1f} kJ "
                  f"({r['energy_j'] / base['energy_j']:.2f}×) | {r['mean_smact']:.2f} | "
                  f"{r['oom_crashes']} | {r['succeeded']}/{r['jobs']} |"]
        path = os.path.join(args.results, folder, "sim", "comparison.json")
        if os.path.exists(path):
            with open(path) as f:
                row = json.load(f)[0]
            lines += ["", f"{simulated}, measured / predicted: " + ", ".join(
                f"{name} {row['measured'][k]:.0f} / {row['predicted'][k]:.0f} "
                f"({100 * (row['predicted'][k] - row['measured'][k]) / row['measured'][k]:+.0f}%)"
                for k, name in (("total_s", "total s"), ("avg_jct_s", "JCT s"), ("energy_kj", "energy kJ")))
                + "."]
        timeline_svg(r, os.path.join(args.results, folder, "timeline-worst-fit.svg"))
        images.append(f"![{caption}]({folder}/timeline-worst-fit.svg)")
    cpu = []
    for folder in ("", "no-ballast"):
        for m in ["idle"] + MODES:
            path = os.path.join(args.results, folder, f"colod-cpu-{m}.json")
            if os.path.exists(path):
                with open(path) as f:
                    cpu.append((folder, json.load(f)))
    if cpu:
        lines += ["", "colod's own CPU time (user + system, /proc/PID/stat) from its start to the end "
                      "of each mode's last job:", "",
                  "| mode | wall | CPU time | share of one core | per GPU |", "|---|---|---|---|---|"]
        for folder, c in cpu:
            seconds = c["cpu_ticks"] / c["clk_tck"]
            share = seconds / c["wall_s"]
            lines.append(f"| {c['mode']}{', no ballast' if folder else ''} | {c['wall_s']:.0f} s | "
                         f"{seconds:.2f} s | {100 * share:.2f}% | {100 * share / c['gpus']:.2f}% |")
    lines += ["", "Timelines:", ""]
    for m, r in runs.items():
        timeline_svg(r, os.path.join(args.results, f"timeline-{m}.svg"))
        lines.append(f"![{m}](timeline-{m}.svg)")
    lines += images
    with open(os.path.join(args.results, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
