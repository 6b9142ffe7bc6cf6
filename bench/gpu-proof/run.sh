#!/usr/bin/env bash
# colod on a real GPU with real PyTorch jobs. Re-run on any machine with an NVIDIA GPU, PyTorch
# and torchvision:  bench/gpu-proof/run.sh   (as root or as a user; results under $OUT)
#   (a) four light jobs collocate under MPS with per-job limits: throughput gain vs one alone
#   (b) a job whose real peak exceeds its declared memory hits its MPS memory limit, is
#       recognised as out of memory, re-queued with a larger need and completes
#   (c) `colo gpus` and the metrics endpoint against NVML read directly
#   (d) colod is killed (-9) while (a) runs and restarted: no job is lost
# It never changes the GPU's compute mode, clocks or MIG layout, and stops the MPS daemon it
# started before it ends.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${COLO_BIN:-$root/build/bin}
OUT=${OUT:-/tmp/colo-gpu-proof}
mkdir -p "$OUT"
export PATH="$BIN:/usr/local/nvidia/bin:$PATH"
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}"
work=$(mktemp -d /tmp/colo-proof-XXXXXX)
export COLO_SOCKET="$work/colod.sock"
METRICS_PORT=${METRICS_PORT:-9464}
cat > "$work/colod.toml" <<TOML
[scheduler]
policy = "worst-fit"
launch_grace = "3s"
[paths]
state_dir = "$work/state"
socket = "$work/colod.sock"
[metrics]
enabled = true
port = $METRICS_PORT
TOML

log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
start_colod() {
  colod --config "$work/colod.toml" >> "$OUT/colod.log" 2>&1 &
  echo $! > "$work/colod.pid"
  for _ in $(seq 50); do colo queue > /dev/null 2>&1 && return 0; sleep 0.1; done
  log "colod did not start"; cat "$OUT/colod.log"; exit 1
}
cleanup() {
  kill "$(cat "$work/colod.pid" 2>/dev/null)" 2>/dev/null; sleep 1
  pkill -f "$here/train.py" 2>/dev/null
  CUDA_MPS_PIPE_DIRECTORY="$work/state/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$work/state/mps/log" \
    timeout 10 nvidia-cuda-mps-control <<< quit > /dev/null 2>&1
  tar czf "$OUT/job-logs.tgz" -C "$work/state" jobs 2>/dev/null
  cp "$work/state/mps/log/control.log" "$OUT/mps-control.log" 2>/dev/null
}
trap cleanup EXIT
wait_idle() {  # until no job is queued or running, at most $1 seconds
  for _ in $(seq $(( $1 * 2 ))); do
    [ "$(colo queue --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')" = 0 ] && return 0
    sleep 0.5
  done
  log "timed out waiting for jobs"; colo queue; return 1
}
result() { tail -n 1 "$work/state/jobs/$1/attempt-$2.out" 2>/dev/null; }
job_id() { sed -n 's/^Submitted job //p'; }

nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv | tee -a "$OUT/summary.txt"
start_colod
colo gpus | tee -a "$OUT/summary.txt"
LIGHT="python3 $here/train.py --model resnet18 --batch 128 --img 32 --iters 4000"

log "(a) one light job alone (exclusive)"
alone=$(colo submit --share exclusive --mem 3GiB --name light-alone -- $LIGHT | job_id)
wait_idle 300
result "$alone" 1 | tee -a "$OUT/summary.txt"

log "(a+d) four light jobs under MPS; colod killed -9 and restarted while they run"
ids=()
for i in 1 2 3 4; do ids+=("$(colo submit --share mps --mem 3GiB --name light-$i -- $LIGHT | job_id)"); done
sleep 16
colo queue | tee -a "$OUT/summary.txt"
log "(c) colo gpus, metrics and NVML read directly, at the same moment"
colo gpus --json > "$OUT/gpus.json"
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$METRICS_PORT/metrics').read().decode())" > "$OUT/metrics.txt"
python3 "$here/nvml_probe.py" 0 > "$OUT/nvml.json"
colo gpus --json > "$OUT/gpus-after.json"
colo gpus | tee -a "$OUT/summary.txt"
grep -E '^colo_gpu_(smact|smocc|power_watts|energy_joules_total|memory_used_bytes)\{gpu="0"' "$OUT/metrics.txt" | tee -a "$OUT/summary.txt"
tee -a "$OUT/summary.txt" < "$OUT/nvml.json"
kill -9 "$(cat "$work/colod.pid")"
log "colod killed; jobs still running: $(pgrep -fc "$here/train.py")"
sleep 2
start_colod
colo queue | tee -a "$OUT/summary.txt"
wait_idle 400
for id in "${ids[@]}"; do result "$id" 1 | tee -a "$OUT/summary.txt"; done

log "(b) declared 3 GiB, really needs more (ResNet-50, batch 64, 224x224) under MPS"
big=$(colo submit --share mps --mem 3GiB --name underdeclared -- python3 "$here/train.py" --model resnet50 --batch 64 --img 224 --iters 200 | job_id)
wait_idle 400
colo show "$big" | tee -a "$OUT/summary.txt"

log "history"
colo history | tee -a "$OUT/summary.txt"
for id in "$alone" "${ids[@]}" "$big"; do colo show "$id" --json > "$OUT/job-$id.json"; done

python3 - "$OUT" "$work/state/jobs" "$alone" "$big" "${ids[@]}" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
out, logs, alone, big, ids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def last_json(job, attempt=1):
    path = f"{logs}/{job}/attempt-{attempt}.out"
    try:
        return json.loads(open(path).read().strip().splitlines()[-1])
    except Exception as e:
        return None
a = last_json(alone)
four = [last_json(i) for i in ids]
if a and all(four):
    gain = sum(f["throughput_its"] for f in four) / a["throughput_its"]
    print(f"(a) alone {a['median_iter_ms']:.2f} ms/iter; 4 under MPS {[round(f['median_iter_ms'], 2) for f in four]} ms/iter;"
          f" throughput gain {gain:.2f}x (measurements.md: 3.55x; target 3.02-4.08x)")
    print(f"    MPS settings seen by the jobs: threads {[f['thread_percent'] for f in four]}, limits {[f['mem_limit'] for f in four]}")
else:
    print("(a) missing results", a, four)
g = json.load(open(f"{out}/gpus.json"))["gpus"][0]
g2 = json.load(open(f"{out}/gpus-after.json"))["gpus"][0]
nv = json.load(open(f"{out}/nvml.json"))
print(f"(c) colo gpus: used {g['memory_used']/2**30:.2f}->{g2['memory_used']/2**30:.2f} GiB, power {g['power_watts']:.0f}->{g2['power_watts']:.0f} W,"
      f" energy {g['energy_joules']/1e3:.1f}->{g2['energy_joules']/1e3:.1f} kJ, smact {g['smact']:.3f}->{g2['smact']:.3f}, smocc {g['smocc']:.3f}->{g2['smocc']:.3f}")
print(f"    NVML direct: used {nv['memory_used_gib']:.2f} GiB, power {nv['power_w']:.0f} W, energy {nv['energy_kj']:.1f} kJ,"
      f" smact {nv['smact']:.3f}, smocc {nv['smocc']:.3f}")
b = json.load(open(f"{out}/job-{big}.json"))["job"]
print(f"(b) underdeclared job: state {b['state']}, attempts:")
for t in b["attempt_list"]:
    print(f"    attempt {t['number']}: mode {t['mode']}, limit {t['memory_limit']/2**30:.1f} GiB, peak {t['peak']/2**30:.2f} GiB, {t['exit_kind']} {t['detail'][:120]}")
ok = all(json.load(open(f"{out}/job-{i}.json"))["job"]["state"] == "succeeded" for i in [alone, *ids])
print(f"(d) all light jobs succeeded across the colod kill/restart: {ok}")
PY
