#!/usr/bin/env bash
# The estimator's measurements on a machine with an NVIDIA GPU and PyTorch (torchvision, timm and
# transformers for the real models). Work files stay in build-estimate/ so that a stopped run
# resumes; what is worth keeping is packed into $OUT.
#   bench/estimate/run.sh smoke               every step on two cases and a few configurations
#   bench/estimate/run.sh collect SECONDS     GPUMemNet's dataset (resumable)
#   bench/estimate/run.sh evaluate SECONDS    the real-model evaluation (resumable)
#   bench/estimate/run.sh both S1 S2          collect for S1 seconds, then evaluate for S2
#   bench/estimate/run.sh heldout SECONDS     models outside the main set (checks the margins)
#   bench/estimate/run.sh user SECONDS        users' own code: task heads, examples/profile
#   bench/estimate/run.sh calibrate           colo-calibrate --mps only (also done first by the rest)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/colo-estimate}
work=$root/build-estimate
mkdir -p "$OUT" "$work"
export PYTHONUNBUFFERED=1 PATH="/usr/local/nvidia/bin:$PATH"
mode=${1:-smoke}
seconds=${2:-300}

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$OUT/gpu.txt" 2>&1
[ -f "$work/calibration.json" ] ||
  python3 "$root/tools/colo_calibrate.py" --mps -o "$work/calibration.json" 2>&1 | tail -5
cp "$work/calibration.json" "$OUT/" 2>/dev/null

case $mode in
  smoke)
    rm -rf "$work/smoke"
    python3 "$here/evaluate.py" --out "$work/smoke/eval" --cases smoke --seconds 120 2>&1 | tee "$OUT/eval.log"
    python3 "$here/gpumemnet_collect.py" --out "$work/smoke/gpumemnet" --workers 3 --seconds 40 \
      --per-family 3 2>&1 | tee "$OUT/collect.log"
    tar czf "$OUT/smoke.tgz" -C "$work" smoke
    ;;
  collect)
    python3 "$here/gpumemnet_collect.py" --out "$work/gpumemnet" --workers "${WORKERS:-6}" \
      --seconds "$seconds" 2>&1 | tail -20 | tee "$OUT/collect.log"
    tar czf "$OUT/gpumemnet.tgz" -C "$work" gpumemnet
    ;;
  evaluate)
    python3 "$here/evaluate.py" --out "$work/eval" --seconds "$seconds" 2>&1 | tee "$OUT/eval.log"
    tar czf "$OUT/eval.tgz" -C "$work" eval
    ;;
  calibrate) ;;
  user)  # users' own code: Hugging Face task heads and the documented examples
    python3 "$here/evaluate.py" --out "$work/user" --cases user --seconds "$seconds" 2>&1 | tee "$OUT/user.log"
    tar czf "$OUT/user.tgz" -C "$work" user
    ;;
  heldout)  # models outside the main set, to check the trace estimator's margins
    python3 "$here/evaluate.py" --out "$work/heldout" --cases heldout --seconds "$seconds" 2>&1 | tee "$OUT/heldout.log"
    tar czf "$OUT/heldout.tgz" -C "$work" heldout
    ;;
  both)  # collect for SECONDS, then evaluate
    python3 "$here/gpumemnet_collect.py" --out "$work/gpumemnet" --workers "${WORKERS:-6}" \
      --seconds "$seconds" 2>&1 | tail -20 | tee "$OUT/collect.log"
    tar czf "$OUT/gpumemnet.tgz" -C "$work" gpumemnet
    python3 "$here/evaluate.py" --out "$work/eval" --seconds "${3:-240}" 2>&1 | tee "$OUT/eval.log"
    tar czf "$OUT/eval.tgz" -C "$work" eval
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
ls -la "$OUT"
