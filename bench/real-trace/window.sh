#!/usr/bin/env bash
# The 4-GPU run on a GPU machine reached by commands of at most 10 minutes each: the modes run on
# in the background (setsid) while later commands wait on them.
#   window.sh start      makes the colo-profile profiles the trace's workloads lack (on the CPU, fake
#                        tensors), checks (a 2-GPU job, an under-declared job's out-of-memory
#                        recovery, each new workload's first steps), then starts the modes in the
#                        background and waits on them until WAIT_S (default 540) seconds into the
#                        command
#   window.sh wait       waits until the modes end or WAIT_S seconds pass; copies what is done
#   window.sh collect    packs everything into $OUT
# Inputs (RT, default .rt/ in the repository): RT/dist (colo binaries), RT/profiles.tgz, RT/TRACE
# (default trace.json); CHAIN: the run.sh calls, ';'-separated "BALLAST_LEAVE|MODES" (default
# every mode with 40 GiB left, then worst-fit and exclusive without ballast). PREFLIGHT_TWO_GPU and
# PREFLIGHT_WORKLOADS name the preflight's 2-GPU workload and the workloads whose first steps it
# checks. Everything lands in /tmp/rt/out; progress in /tmp/rt/progress.log.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RT=${RT:-$root/.rt}
OUT=${OUT:-/tmp/colo-real-trace}
work=/tmp/rt
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The estimator's GPU calibrations (without them the preflight's estimates fell back to Horus).
export PYTHONUNBUFFERED=1 COLO_BIN=$RT/dist COLO_DATA_DIR=$RT/data PATH="$RT/dist:/usr/local/nvidia/bin:$PATH"
[ -d "$RT/dist/lib" ] && export LD_LIBRARY_PATH="$RT/dist/lib:${LD_LIBRARY_PATH:-}"
CHAIN=${CHAIN:-"40|idle exclusive round-robin round-robin-mps worst-fit least-utilized consolidate worst-fit-recovery;|worst-fit exclusive"}
begin=$(date +%s)
log() { echo "[$(date +%T)] $*" | tee -a "$work/progress.log"; }

wait_modes() {  # until the background chain ends or WAIT_S seconds into this command
  local until=$((begin + ${WAIT_S:-540}))
  while [ "$(date +%s)" -lt "$until" ] && [ ! -f "$work/done" ]; do sleep 5; done
  tail -n 12 "$work/progress.log"
  grep -h "total .* succeeded" "$work"/out/*/drive.log 2>/dev/null
  (cd "$work" && tar czf "$OUT/partial.tgz" out progress.log 2>/dev/null)
  [ -f "$work/done" ] && echo "ALL DONE" || echo "still running"
}

preflight() {
  local dir=$work/out/preflight state=$work/preflight
  mkdir -p "$dir" "$state"
  cat > "$state/colod.toml" <<TOML
[scheduler]
policy = "worst-fit"
launch_grace = "3s"
[paths]
state_dir = "$state/state"
socket = "$state/colod.sock"
TOML
  export COLO_SOCKET=$state/colod.sock
  colod --config "$state/colod.toml" > "$dir/colod.log" 2>&1 &
  local pid=$!
  for _ in $(seq 50); do colo queue > /dev/null 2>&1 && break; sleep 0.1; done
  colo gpus > "$dir/gpus.txt" 2>&1
  local job="python3 $here/job.py" est="--gpu-model $GPU_MODEL --estimate-from $work/profiles"
  local ids=()
  local two=${PREFLIGHT_TWO_GPU:-gpt2-s512-b8}
  ids+=("$(colo submit --json --name two-gpu --share mps --gpus 2 $est/$two.json -- \
    $job "$two" --iters 20 --gpus 2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"])')")
  ids+=("$(colo submit --json --name underdeclared --share mps --mem 3GiB -- \
    $job resnet50-i224-b128 --iters 40 | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"])')")
  for w in ${PREFLIGHT_WORKLOADS:-vgg16-i224-b64 inception_v3-i299-b64 bert-base-s512-b16 gpt2-medium-s512-b4}; do
    ids+=("$(colo submit --json --name "$w" --share mps $est/$w.json -- $job "$w" --iters 10 |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["job"])')")
  done
  for _ in $(seq 240); do colo queue --json | grep -q '"id"' || break; sleep 0.5; done
  for id in "${ids[@]}"; do
    colo show "$id" --json > "$dir/job-$id.json"
    colo show "$id" >> "$dir/show.txt" 2>&1
    python3 - "$dir/job-$id.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["job"]
a = j.get("attempt_list", [])
print(j["name"], j["state"], [(x.get("exit_kind"), round((x.get("memory_limit") or 0) / 2**30, 1),
      round((x.get("peak") or 0) / 2**30, 1)) for x in a])
if j["state"] != "succeeded" or (j["name"] == "underdeclared" and len(a) > 2):
    print("BAD", j["name"])
PY
  done > "$dir/verdict.txt"
  cat "$dir/verdict.txt"
  kill "$pid"; wait "$pid" 2>/dev/null
  CUDA_MPS_PIPE_DIRECTORY="$state/state/mps/pipe" timeout 10 nvidia-cuda-mps-control <<< quit > /dev/null 2>&1
}

# colo-profile for every workload of the trace that has no profile yet, in parallel on the CPU.
make_profiles() {
  python3 - "$RT/${TRACE:-trace.json}" "$here/workloads.json" "$work/profiles" "$root/tools/colo_profile.py" <<'PY'
import json, os, subprocess, sys
trace, workloads, profiles, tool = sys.argv[1:]
spec = {w["name"]: w for w in json.load(open(workloads))["workloads"]}
runs = []
for name in sorted({j["workload"] for j in json.load(open(trace))["jobs"]}):
    out = os.path.join(profiles, name + ".json")
    if os.path.exists(out):
        continue
    w = spec[name]
    cmd = [sys.executable, tool, w["target"], "--batch", str(w["batch"]), "--optimizer", w["optimizer"],
           "-o", out]
    cmd += ["--input-shape", w["input_shape"]] if "input_shape" in w else []
    cmd += ["--seq-len", str(w["seq_len"])] if "seq_len" in w else []
    runs.append((name, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
for name, proc in runs:
    text = proc.communicate()[0]
    print(name, "profiled" if proc.returncode == 0 else "PROFILE FAILED", text.strip().splitlines()[-1:])
PY
}

chain() {
  local i=0 part leave modes
  IFS=';' read -ra parts <<< "$CHAIN"
  for part in "${parts[@]}"; do
    i=$((i + 1))
    leave=${part%%|*}; modes=${part#*|}
    mkdir -p "$work/out/part$i"
    log "part $i: ballast '${leave:-none}', modes $modes"
    OUT="$work/out/part$i" BALLAST_LEAVE=$leave SOLO=$RT/solo.json DRIVE_TIMEOUT=${DRIVE_TIMEOUT:-420} \
      IDLE_S=${IDLE_S:-45} bash "$here/run.sh" "$RT/${TRACE:-trace.json}" "$work/profiles" $modes \
      > "$work/out/part$i/drive.log" 2>&1
    log "part $i ended: $(grep -c succeeded "$work/out/part$i/drive.log") modes reported"
  done
  touch "$work/done"
}

case ${1:-} in
  start)
    rm -rf "$work"; mkdir -p "$work/out"
    nvidia-smi --query-gpu=index,name,memory.total,memory.used,compute_mode,power.draw,driver_version \
      --format=csv | tee "$work/out/gpus.csv"
    nproc; python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.device_count())'
    GPU_MODEL=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[0-9]\{3\}' || echo H200)
    export GPU_MODEL
    tar xzf "$RT/profiles.tgz" -C "$work"
    make_profiles | tee "$work/out/profiles.log"
    (cd "$work" && tar czf "$work/out/profiles-made.tgz" profiles)
    log "preflight on $GPU_MODEL"
    preflight
    trace=${TRACE:-trace.json}
    if grep BAD "$work/out/preflight/verdict.txt" | grep -qv underdeclared; then
      # A workload the trace needs does not run here: the trace of workloads run before instead.
      trace=trace-fallback.json
      log "PREFLIGHT: $(grep BAD "$work/out/preflight/verdict.txt" | tr '\n' ' ')-> $trace"
      tail -30 "$work/out/preflight/show.txt"
    fi
    log "preflight done; modes start on $trace"
    # The modes run from a copy outside the working tree: a later command that does not carry RT
    # gets a tree without it, and the modes still to start would find no scripts or binaries.
    copy=$work/src
    mkdir -p "$copy/bench"
    cp -r "$here" "$copy/bench/" && cp -r "$root/tools" "$root/python" "$root/data" "$copy/" &&
      cp -r "$RT" "$copy/rt" || { log "could not copy the run's files to $copy"; exit 1; }
    RT=$copy/rt TRACE=$trace GPU_MODEL=$GPU_MODEL \
      setsid bash "$copy/bench/real-trace/window.sh" chain > "$work/chain.log" 2>&1 < /dev/null &
    wait_modes ;;
  chain) chain ;;
  wait) wait_modes ;;
  collect)
    cp "$work/chain.log" "$work/out/" 2>/dev/null
    (cd "$work" && tar czf "$OUT/results.tgz" out progress.log)
    ls -la "$OUT" ;;
  *) echo "usage: window.sh start|wait|collect"; exit 2 ;;
esac
