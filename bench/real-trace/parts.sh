#!/usr/bin/env bash
# The full benchmark in parts of under 10 minutes each (two or three modes a part):
#   COLO_BIN=dist bench/real-trace/parts.sh [--preflight] MODE...
# --preflight first runs preflight-trace.json (a 2-GPU job and a light one on MPS with colo's
# estimator) and stops if either fails. Then every MODE on $TRACE (default trace-h200x2.json), with
# the solo profiles of results-h200-2026-11-21 as the estimator's summaries. Leaves
# $OUT/part-MODES.tgz. BALLAST_LEAVE (run.sh) passes through; PREFLIGHT and PREFLIGHT_MODE choose
# another preflight trace and mode.
set -u
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/colo-real-trace}
name="part-$(IFS=-; echo "$*" | tr -d ' ' | sed 's/^--preflight-//')"
work=$(mktemp -d /tmp/colo-parts-XXXXXX)
tar xzf "$here/results-h200-2026-11-21/solo-and-profiles.tgz" -C "$work"
profiles="$work/solo-h200/profiles"
nvidia-smi --query-gpu=index,name,compute_mode,memory.used,power.draw --format=csv
finish() { (cd "$work/out" && tar czf "$OUT/$name.tgz" .); rm -rf "$work"; }
mkdir -p "$work/out"
if [ "${1:-}" = --preflight ]; then
  shift
  check=${PREFLIGHT_MODE:-worst-fit}
  OUT="$work/out/preflight" DRIVE_TIMEOUT=120 bash "$here/run.sh" \
    "${PREFLIGHT:-$here/preflight-trace.json}" "$profiles" "$check"
  if ! python3 - "$work/out/preflight/result-$check.json" <<'PY'; then
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["records"]:
    print(x["workload"], x["gpus"], x["state"], [(a["exit"], a["detail"]) for a in x["attempts"]])
print(r["job_reports"])
sys.exit(r["succeeded"] != len(r["records"]))
PY
    echo "preflight failed"; tail -30 "$work/out/preflight/colod-$check.log"; finish; exit 3
  fi
fi
OUT="$work/out" DRIVE_TIMEOUT=${DRIVE_TIMEOUT:-480} bash "$here/run.sh" "${TRACE:-$here/trace-h200x2.json}" \
  "$profiles" "$@"
finish
