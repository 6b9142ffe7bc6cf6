#!/usr/bin/env bash
# colod on a real GPU with jobs of two frameworks and jobs whose memory colo gets wrong:
#   (a) a JAX job declared at 2 GiB under plain sharing beside two PyTorch jobs: colod's framework
#       settings keep it to its plan (run alone without them first: JAX takes 75% of the GPU)
#   (b) a PyTorch job whose peak exceeds its plan under plain sharing: event, metric, show line,
#       raised need
#   (c) a ResNet-50 declared at 3 GiB that needs about 7 GiB, under MPS: attempts until it succeeds
#   (d) the same light job twice: the second is planned with the first run's solo SM activity
# Needs an NVIDIA GPU, PyTorch, torchvision and JAX. Never changes the GPU's settings; stops the
# MPS daemon colod started. Results under $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${COLO_BIN:-$root/build/bin}
OUT=${OUT:-/tmp/colo-frameworks}
mkdir -p "$OUT"
export PATH="$BIN:/usr/local/nvidia/bin:$PATH"
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}"
work=$(mktemp -d /tmp/colo-frameworks-XXXXXX)
export COLO_SOCKET="$work/colod.sock"
METRICS_PORT=${METRICS_PORT:-9465}
cat > "$work/colod.toml" <<TOML
[scheduler]
policy = "worst-fit"
launch_grace = "2s"
[paths]
state_dir = "$work/state"
socket = "$work/colod.sock"
[metrics]
enabled = true
port = $METRICS_PORT
TOML
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
cleanup() {
  kill "$(cat "$work/colod.pid" 2>/dev/null)" 2>/dev/null; sleep 1
  pkill -f "$root/bench/(gpu-proof|frameworks)/" 2>/dev/null
  CUDA_MPS_PIPE_DIRECTORY="$work/state/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$work/state/mps/log" \
    timeout 10 nvidia-cuda-mps-control <<< quit > /dev/null 2>&1
  tar czf "$OUT/job-logs.tgz" -C "$work/state" jobs 2>/dev/null
  cp "$work/colod.log" "$OUT/" 2>/dev/null
}
trap cleanup EXIT
colod --config "$work/colod.toml" >> "$work/colod.log" 2>&1 &
echo $! > "$work/colod.pid"
for _ in $(seq 50); do colo queue > /dev/null 2>&1 && break; sleep 0.1; done
wait_idle() {
  for _ in $(seq $(( $1 * 2 ))); do
    [ "$(colo queue --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')" = 0 ] && return 0
    sleep 0.5
  done
  log "timed out waiting for jobs"; colo queue; return 1
}
job_id() { sed -n 's/^Submitted job //p'; }
peak_of_pid() {  # NVML's peak for a pid, polled while it runs
  python3 - "$1" <<'PY'
import sys, time, os
sys.path.insert(0, os.environ["ROOT"] + "/tools")
from colo_calibrate import Nvml
n = Nvml(); h = n.handle(0); pid = int(sys.argv[1]); peak = 0
while os.path.exists(f"/proc/{pid}"):
    peak = max(peak, n.process_memory(h).get(pid, 0)); time.sleep(0.05)
print(peak)
PY
}
export ROOT=$root
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$OUT/summary.txt"

log "(a0) the JAX job alone, outside colo (JAX's defaults)"
python3 "$here/jax_train.py" --seconds 8 > "$OUT/jax-alone.out" 2>&1 &
jaxpid=$!
log "JAX alone: NVML peak $(peak_of_pid $jaxpid) bytes; $(tail -1 "$OUT/jax-alone.out")"

log "(a) JAX declared at 2 GiB, plain sharing, beside two PyTorch jobs"
LIGHT="python3 $root/bench/gpu-proof/train.py --model resnet18 --batch 128 --img 32 --iters 1500"
t1=$(colo submit --share plain --mem 3GiB --name torch-1 -- $LIGHT | job_id)
t2=$(colo submit --share plain --mem 3GiB --name torch-2 -- $LIGHT | job_id)
jx=$(colo submit --share plain --mem 2GiB --name jax -- python3 "$here/jax_train.py" --seconds 20 | job_id)
# A user's own setting wins over colod's (the job runs with the submitter's environment).
jo=$(XLA_PYTHON_CLIENT_PREALLOCATE=false colo submit --share plain --mem 2GiB --name jax-own-settings \
  -- python3 "$here/jax_train.py" --seconds 10 | job_id)
wait_idle 300
for id in $t1 $t2 $jx $jo; do colo show "$id" | tee -a "$OUT/summary.txt"; tail -1 "$work/state/jobs/$id/attempt-1.out" 2>/dev/null | tee -a "$OUT/summary.txt"; done

log "(b) a job whose peak exceeds its plan under plain sharing (ResNet-50 at 224, declared 2 GiB)"
ob=$(colo submit --share plain --mem 2GiB --name over-plan -- python3 "$root/bench/gpu-proof/train.py" --model resnet50 --batch 64 --img 224 --iters 60 | job_id)
wait_idle 300
colo show "$ob" | tee -a "$OUT/summary.txt"
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$METRICS_PORT/metrics').read().decode())" > "$OUT/metrics.txt"
grep -i "over_plan\|overplan" "$OUT/metrics.txt" | tee -a "$OUT/summary.txt"

log "(c) declared 3 GiB, needs about 7 GiB (ResNet-50, batch 64, 224x224), under MPS"
big=$(colo submit --share mps --mem 3GiB --name underdeclared -- python3 "$root/bench/gpu-proof/train.py" --model resnet50 --batch 64 --img 224 --iters 100 | job_id)
started=$(date +%s.%N)
wait_idle 400
log "(c) took $(python3 -c "print(round($(date +%s.%N) - $started, 1))") s"
colo show "$big" | tee -a "$OUT/summary.txt"

log "(d) the same light job twice, one after the other"
SOLO="python3 $root/bench/gpu-proof/train.py --model resnet18 --batch 256 --img 32 --iters 800"
s1=$(colo submit --share mps --mem 3GiB --name solo -- $SOLO | job_id); wait_idle 300
s2=$(colo submit --share mps --mem 3GiB --name solo -- $SOLO | job_id); wait_idle 300
colo show "$s1" | tee -a "$OUT/summary.txt"; colo show "$s2" | tee -a "$OUT/summary.txt"
for id in $t1 $t2 $jx $jo $ob $big $s1 $s2; do colo show "$id" --json > "$OUT/job-$id.json"; done
colo history | tee -a "$OUT/summary.txt"
