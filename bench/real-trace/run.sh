#!/usr/bin/env bash
# The real-trace benchmark: colod for real (NVML, MPS, real processes) through each mode on one trace.
#   bench/real-trace/run.sh TRACE.json PROFILES_DIR MODE...
#   (modes: exclusive round-robin round-robin-mps worst-fit least-utilized consolidate
#   worst-fit-recovery worst-fit-oracle, see drive.py; and idle: colod with no job for IDLE_S
#   seconds, default 60, for its own CPU use)
# Results (one JSON per mode, colod logs, colod's CPU time per mode) under $OUT. It never changes the
# GPU's compute mode, clocks or MIG layout, and stops the MPS daemon colod started before it ends.
# With BALLAST_LEAVE=GIB, a ballast process (ballast.py) holds all but GIB GiB of every GPU through
# all the modes: memory binds. GPU_MODEL (default: read from nvidia-smi) is what colo's estimator
# is told; SOLO names the solo profiles whose peaks the oracle declares, or with ORACLE_PEAKS=exclusive
# the peaks this run's exclusive mode measured (run exclusive before worst-fit-oracle).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${COLO_BIN:-$root/build/bin}
OUT=${OUT:-/tmp/colo-real-trace}
trace=$1; profiles=$2; shift 2
mkdir -p "$OUT"
export PATH="$BIN:/usr/local/nvidia/bin:$PATH" COLO_DATA_DIR="$root/data" PYTHONUNBUFFERED=1
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}"
gpu_model=${GPU_MODEL:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 |
  grep -o 'H[0-9]\{3\}\|A100' || echo H200)}
policy_of() { case $1 in exclusive|idle) echo exclusive;; round-robin|round-robin-mps) echo round-robin;;
  worst-fit|worst-fit-recovery|worst-fit-oracle) echo worst-fit;;
  least-utilized) echo least-utilized;; consolidate) echo consolidate;; esac; }
# colod's CPU time so far (user + system clock ticks), from /proc.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
ballast=""
held=$(mktemp -d /tmp/colo-rt-ballast-XXXXXX)
if [ -n "${BALLAST_LEAVE:-}" ]; then
  python3 "$here/ballast.py" --leave "$BALLAST_LEAVE" --ready "$held/ballast.json" \
    > "$OUT/ballast.log" 2>&1 &
  ballast=$!
  for _ in $(seq 600); do [ -f "$held/ballast.json" ] && break; sleep 0.1; done
  if [ ! -f "$held/ballast.json" ]; then  # without it memory would not bind: run nothing
    echo "ballast did not start; no mode run"; cat "$OUT/ballast.log"
    kill "$ballast" 2>/dev/null; wait "$ballast" 2>/dev/null; rm -rf "$held"; exit 1
  fi
fi
for mode in "$@"; do
  work=$(mktemp -d /tmp/colo-rt-XXXXXX)
  cat > "$work/colod.toml" <<TOML
[scheduler]
policy = "$(policy_of "$mode")"
launch_grace = "${LAUNCH_GRACE:-10s}"
[paths]
state_dir = "$work/state"
socket = "$work/colod.sock"
TOML
  export COLO_SOCKET="$work/colod.sock"
  colod --config "$work/colod.toml" > "$OUT/colod-$mode.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do colo queue > /dev/null 2>&1 && break; sleep 0.1; done
  cpu_start=$(cpu_ticks "$pid"); t_start=$(date +%s.%N)
  if [ "$mode" = idle ]; then
    sleep "${IDLE_S:-60}"
  else
    python3 "$here/drive.py" --trace "$trace" --mode "$mode" --profiles "$profiles" \
      --out "$OUT/result-$mode.json" --colo "$BIN/colo" --timeout "${DRIVE_TIMEOUT:-1200}" \
      --gpu-model "$gpu_model" ${SOLO:+--solo "$SOLO"} \
      ${ORACLE_PEAKS:+--peaks-from "$OUT/result-$ORACLE_PEAKS.json"} \
      ${ballast:+--ballast "$held/ballast.json"} || echo "drive.py failed for $mode"
    # Past its time limit: end what is left, so that the next mode starts on idle GPUs.
    if colo queue --json | grep -q '"id"'; then
      for state in PD RO R; do colo cancel -t "$state" > /dev/null 2>&1; done
      sleep 5
    fi
  fi
  cpu_end=$(cpu_ticks "$pid"); t_end=$(date +%s.%N)
  gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
  echo "{\"mode\": \"$mode\", \"cpu_ticks\": $((${cpu_end:-0} - ${cpu_start:-0})), \"clk_tck\": $(getconf CLK_TCK), \"wall_s\": $(awk "BEGIN { print $t_end - $t_start }"), \"gpus\": $gpus}" \
    > "$OUT/colod-cpu-$mode.json"
  kill "$pid"; wait "$pid" 2>/dev/null
  CUDA_MPS_PIPE_DIRECTORY="$work/state/mps/pipe" timeout 10 nvidia-cuda-mps-control <<< quit > /dev/null 2>&1
  rm -rf "$work"
done
[ -n "$ballast" ] && { kill "$ballast"; wait "$ballast" 2>/dev/null; }
rm -rf "$held"
