#!/usr/bin/env bash
# A fresh unseen set on a machine with NVIDIA GPUs and PyTorch (with timm): timm families no margin,
# coefficient or catalogue entry was chosen on -- ConvNeXt variants, EfficientNetV2, RegNet, MaxViT,
# Swin-V2 -- at several batches. Per case the truth (the training process's peak by NVML, polled
# every 2 ms, 8 steps in a fresh process) and colo-profile's profile of it; beside them a
# calibration whose convolution catalogue measures channels-last calls on their own, and new
# profiles of the kept sets' ConvNeXt cases (whose truths are kept), so that the channels-last
# records are read on both. Runs from the repository's root in about 6 minutes on 4 GPUs: GPU 0
# calibrates while each other GPU runs a share of the cases; on 1 GPU everything shares it.
#
#   bench/estimate/unseen.sh [SECONDS]      (default 330; a stopped run keeps what it measured)
#
# RUN_JOBS=N trains N cases at a time on each GPU (default 1): each process's peak is its own, so
# on 2 GPUs RUN_JOBS=2 fits the whole set into about 4 minutes.
#
# Everything worth keeping is packed into $OUT/unseen.tgz. Nothing here needs colo's C++ build:
# the estimates are made afterwards, anywhere, with bench/estimate/report.py (see
# docs/estimation.md).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${OUT:-/tmp/colo-unseen}
work=$root/build-unseen
seconds=${1:-330}
mkdir -p "$OUT" "$work"
export PYTHONUNBUFFERED=1 PATH="/usr/local/nvidia/bin:$PATH"
cd "$root"

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c "import torch, timm; print('torch', torch.__version__, 'timm', timm.__version__)" \
  > "$OUT/versions.txt" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 1 ] || { echo "no GPU visible" | tee "$OUT/error.txt"; exit 1; }

# GPU 0: the calibration, with channels-last convolutions in its catalogue.
(
  started=$(date +%s)
  CUDA_VISIBLE_DEVICES=0 timeout "$((seconds - 20))" \
    python3 tools/colo_calibrate.py -o "$work/calibration.json" > "$OUT/calibrate.log" 2>&1
  echo "rc=$? seconds=$(($(date +%s) - started))" >> "$OUT/calibrate.log"
) &

# The other GPUs (GPU 0 too when it is the only one): a share of the unseen cases each, and the
# last share also profiles the kept sets' ConvNeXt cases again.
if [ "$gpus" -gt 1 ]; then first=1; else first=0; fi
shares=$((gpus - first))
for ((g = first; g < gpus; g++)); do
  k=$((g - first))
  (
    CUDA_VISIBLE_DEVICES=$g python3 "$here/evaluate.py" --out "$work/unseen-$k" --cases unseen \
      --shard "$k/$shares" --seconds "$((seconds - 40))" --profile-jobs 6 --run-jobs "${RUN_JOBS:-1}" \
      --snapshot-match convnext_nano-b32 > "$OUT/unseen-$k.log" 2>&1
    if [ "$k" -eq $((shares - 1)) ]; then
      for set in all heldout; do
        CUDA_VISIBLE_DEVICES=$g timeout 120 python3 "$here/evaluate.py" --out "$work/kept-$set" \
          --cases "$set" --match convnext --only profile --profile-jobs 2 \
          >> "$OUT/kept-profiles.log" 2>&1
      done
    fi
  ) &
done
wait

# One folder as report.py reads it: the shares' cases, real traces and results together.
rm -rf "$work/unseen"
mkdir -p "$work/unseen/cases" "$work/unseen/real"
for share in "$work"/unseen-*; do
  cp -r "$share"/cases/. "$work/unseen/cases/" 2>/dev/null
  cp -r "$share"/real/. "$work/unseen/real/" 2>/dev/null
  cat "$share/results.jsonl" >> "$work/unseen/results.jsonl" 2>/dev/null
done
gzip -f "$work"/unseen/real/*.snapshot.pickle 2>/dev/null
cp "$work/calibration.json" "$work/unseen/" 2>/dev/null
mkdir -p "$work/unseen/kept-convnext"
cp -r "$work"/kept-*/cases/. "$work/unseen/kept-convnext/" 2>/dev/null
tar czf "$OUT/unseen.tgz" -C "$work" unseen
ls -la "$OUT"
echo "cases measured: $(grep -c '"run_rc": 0' "$work/unseen/results.jsonl" 2>/dev/null || echo 0)"
