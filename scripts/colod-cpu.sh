#!/usr/bin/env bash
# colod's own CPU time: the user + system time of its process (/proc/PID/stat) over a window, with
# no job and then with one job on every GPU, as % of one core and per GPU, and where it went by
# driver call (colod's /metrics: colo_gpu_backend_cpu_seconds_total). It starts a colod of its own
# (state in a temporary directory, GPUs sampled every second), so run it where no other colod uses
# the GPUs.
#
#   scripts/colod-cpu.sh [--seconds 60] [--warmup 15] [--bin build/bin] [--job 'COMMAND']
#                        [--fake-nvml LIB --gpus N | --fake-gpus N]
#
# On a GPU server, as root, with the real NVML:   scripts/colod-cpu.sh
# The same path without a GPU (the fake libnvidia-ml of the tests, N GPUs):
#   scripts/colod-cpu.sh --fake-nvml build/lib/fake-nvml/libnvidia-ml.so.1 --gpus 8
# colod's own fake GPUs (no NVML code at all):    scripts/colod-cpu.sh --fake-gpus 8
#
# The job on each GPU is --job's command (run through sh -c with the seconds it must last as $1);
# by default a PyTorch matrix product every 10 ms on real GPUs, a process that reports 1 GiB on its
# fake GPU otherwise.
set -euo pipefail

seconds=60
warmup=15
bin=build/bin
fake_nvml=""
fake_gpus=""
gpus=8
job=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --fake-nvml) fake_nvml=$(realpath "$2"); shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --fake-gpus) fake_gpus=$2; shift 2 ;;
    --job) job=$2; shift 2 ;;
    *) echo "colod-cpu.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
bin=$(realpath "$bin")
for program in colod colo colo-shim; do
  [ -x "$bin/$program" ] || { echo "colod-cpu.sh: no $bin/$program (build first)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/colod-cpu.XXXXXX)
chmod 755 "$tmp"
mkdir -m 1777 "$tmp/gpus"
export COLO_SOCKET="$tmp/colod.sock"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$tmp/colod.toml" <<EOF
[scheduler]
sample_interval = "1s"
[metrics]
enabled = true
port = $port
EOF

colod_args=(--config "$tmp/colod.toml" --state-dir "$tmp/state" --socket "$COLO_SOCKET")
colod_env=()
if [ -n "$fake_gpus" ]; then
  colod_args+=(--fake-gpus "$fake_gpus" --fake-gpu-dir "$tmp/gpus")
  backend="colod's fake GPUs"
elif [ -n "$fake_nvml" ]; then
  colod_env=(COLO_NVML_LIBRARY="$fake_nvml" COLO_FAKE_NVML_GPUS="$gpus"
             COLO_FAKE_NVML_DIR="$tmp/gpus")
  backend="NVML over the fake libnvidia-ml ($fake_nvml)"
else
  backend="NVML"
fi
# (The job's text is expanded by the job's own shell, not here.)
# shellcheck disable=SC2016
if [ -z "$job" ]; then
  if [ -n "$fake_gpus$fake_nvml" ]; then
    # Reports 1 GiB on its GPU (the fake GPUs read the file named by its pid) while it runs.
    job='echo "$(expr "${CUDA_VISIBLE_DEVICES##*-}" + 0) 1073741824" > '"$tmp/gpus"'/$$; exec sleep "$1"'
  else
    job='exec python3 -c "
import sys, time, torch
x = torch.randn(2048, 2048, device=\"cuda\")
end = time.time() + float(sys.argv[1])
while time.time() < end:
    x @ x
    torch.cuda.synchronize()
    time.sleep(0.01)
" "$1"'
  fi
fi

env "${colod_env[@]}" "$bin/colod" "${colod_args[@]}" > "$tmp/colod.log" 2>&1 &
colod=$!
ids=()
cleanup() {
  # Jobs outlive colod by design: those of this run are cancelled and seen to end first.
  if [ ${#ids[@]} -gt 0 ]; then
    "$bin/colo" cancel "${ids[@]}" > /dev/null 2>&1 || true
    for _ in $(seq 60); do
      [ "$(running_jobs 2>/dev/null || echo 0)" = 0 ] && break
      sleep 0.5
    done
  fi
  kill "$colod" 2>/dev/null || true
  wait "$colod" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
running_jobs() {
  "$bin/colo" queue --json | python3 -c '
import json, sys
print(sum(1 for j in json.load(sys.stdin)["jobs"] if j.get("state") == "running"))'
}

for _ in $(seq 100); do
  "$bin/colo" gpus --json > "$tmp/gpus.json" 2>/dev/null && break
  kill -0 "$colod" 2>/dev/null || { cat "$tmp/colod.log" >&2; exit 1; }
  sleep 0.2
done
count=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["gpus"]))' "$tmp/gpus.json")
ticks=$(getconf CLK_TCK)

# utime + stime of colod in seconds (/proc/PID/stat: the fields after the command name, which
# may hold spaces; clock ticks), and the run time of all its threads in nanoseconds
# (/proc/PID/task/*/schedstat), finer than a tick where colod uses little.
cpu_seconds() {
  python3 - "$colod" "$ticks" <<'EOF'
import glob, sys
pid, ticks = sys.argv[1], int(sys.argv[2])
fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
ran = 0
for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
    try:
        ran += int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
print((int(fields[11]) + int(fields[12])) / ticks, ran / 1e9)
EOF
}
metrics() {
  python3 -c "import urllib.request
print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())"
}

# One window: colod's CPU over it, and the driver calls' share of it.
measure() {
  local label=$1
  metrics > "$tmp/before.prom"
  local cpu0 t0 cpu1 t1
  cpu0=$(cpu_seconds); t0=$(date +%s.%N)
  sleep "$seconds"
  cpu1=$(cpu_seconds); t1=$(date +%s.%N)
  metrics > "$tmp/after.prom"
  # shellcheck disable=SC2086 # cpu0 and cpu1 are two numbers each
  python3 - "$label" $cpu0 $cpu1 "$t0" "$t1" "$count" "$tmp/before.prom" "$tmp/after.prom" <<'EOF'
import re, sys
label = sys.argv[1]
stat0, ran0, stat1, ran1, t0, t1 = map(float, sys.argv[2:8])
gpus = int(sys.argv[8])
wall = t1 - t0
core = 100 * (stat1 - stat0) / wall
print(f"{label}: colod used {stat1 - stat0:.2f} s of CPU (utime+stime) in {wall:.1f} s: "
      f"{core:.3f}% of a core, {core / gpus:.4f}% per GPU ({gpus} GPUs); its threads ran "
      f"{ran1 - ran0:.4f} s: {100 * (ran1 - ran0) / wall:.4f}% of a core")
def read(path):
    values = {}
    for line in open(path):
        m = re.match(r'^(colo_gpu_backend_(?:calls|cpu_seconds)_total)\{call="(\w+)"\} (\S+)$', line)
        if m:
            values[(m.group(1), m.group(2))] = float(m.group(3))
    return values
before, after = read(sys.argv[9]), read(sys.argv[10])
calls = sorted({call for _, call in after})
for call in calls:
    n = after.get(("colo_gpu_backend_calls_total", call), 0) - before.get(
        ("colo_gpu_backend_calls_total", call), 0)
    cpu = after.get(("colo_gpu_backend_cpu_seconds_total", call), 0) - before.get(
        ("colo_gpu_backend_cpu_seconds_total", call), 0)
    if n:
        print(f"  {call:12} {n / wall / gpus:6.2f} calls/s per GPU  {1e6 * cpu / n:9.1f} us CPU each"
              f"  {100 * cpu / wall:7.3f}% of a core")
EOF
}

echo "colod $("$bin/colod" --version 2>/dev/null | head -1), $backend, $count GPUs, sampled every 1 s; $(nproc) CPUs"
sleep "$warmup"
measure "idle"

duration=$((warmup + seconds + 60))
for _ in $(seq "$count"); do
  ids+=("$("$bin/colo" submit --share exclusive --mem 1GiB --json -- sh -c "$job" job "$duration" |
           python3 -c 'import json,sys; print(json.load(sys.stdin)["job"])')")
done
for _ in $(seq 300); do
  running=$(running_jobs)
  [ "$running" -ge "$count" ] && break
  sleep 1
done
[ "$running" -ge "$count" ] || { echo "colod-cpu.sh: only $running of $count jobs started" >&2; exit 1; }
sleep "$warmup"
measure "one job per GPU"
