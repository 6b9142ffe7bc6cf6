#!/usr/bin/env bash
# The real-trace benchmark: colod for real (NVML, MPS, real processes) through each mode on one trace.
#   bench/real-trace/run.sh TRACE.json PROFILES_DIR MODE...
#   (modes: exclusive round-robin worst-fit least-utilized worst-fit-recovery worst-fit-oracle;
#   see drive.py)
# Results (one JSON per mode, colod logs) under $OUT. It never changes the GPU's compute mode, clocks
# or MIG layout, and stops the MPS daemon colod started before it ends. With BALLAST_LEAVE=GIB, a
# ballast process (ballast.py) holds all but GIB GiB of every GPU through each mode: memory binds.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${COLO_BIN:-$root/build/bin}
OUT=${OUT:-/tmp/colo-real-trace}
trace=$1; profiles=$2; shift 2
mkdir -p "$OUT"
export PATH="$BIN:/usr/local/nvidia/bin:$PATH" COLO_DATA_DIR="$root/data" PYTHONUNBUFFERED=1
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}"
policy_of() { case $1 in exclusive) echo exclusive;; round-robin) echo round-robin;;
  worst-fit|worst-fit-recovery|worst-fit-oracle) echo worst-fit;;
  least-utilized) echo least-utilized;; esac; }
for mode in "$@"; do
  work=$(mktemp -d /tmp/colo-rt-XXXXXX)
  ballast=""
  if [ -n "${BALLAST_LEAVE:-}" ]; then
    python3 "$here/ballast.py" --leave "$BALLAST_LEAVE" --ready "$work/ballast.json" \
      > "$OUT/ballast-$mode.log" 2>&1 &
    ballast=$!
    for _ in $(seq 600); do [ -f "$work/ballast.json" ] && break; sleep 0.1; done
    if [ ! -f "$work/ballast.json" ]; then  # without it memory would not bind: skip the mode
      echo "ballast did not start; $mode skipped"; cat "$OUT/ballast-$mode.log"
      kill "$ballast" 2>/dev/null; wait "$ballast" 2>/dev/null; rm -rf "$work"; continue
    fi
  fi
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
  python3 "$here/drive.py" --trace "$trace" --mode "$mode" --profiles "$profiles" \
    --out "$OUT/result-$mode.json" --colo "$BIN/colo" --timeout "${DRIVE_TIMEOUT:-1200}" \
    ${ballast:+--ballast "$work/ballast.json"} || echo "drive.py failed for $mode"
  kill "$pid"; wait "$pid" 2>/dev/null
  [ -n "$ballast" ] && { kill "$ballast"; wait "$ballast" 2>/dev/null; }
  CUDA_MPS_PIPE_DIRECTORY="$work/state/mps/pipe" timeout 10 nvidia-cuda-mps-control <<< quit > /dev/null 2>&1
  rm -rf "$work"
done
