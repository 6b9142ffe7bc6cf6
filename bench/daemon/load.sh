#!/usr/bin/env bash
# colod under load, through its API, on fake GPUs (no GPU needed): 1,000 concurrent submits and
# 10,000 sequential ones (0 lost, submit latency p50/p99), colod's memory after 100,000 finished
# jobs, and `history` of all of them read in full while another client says hello every 10 ms
# (its p99). Prints a report; the numbers are measured, not asserted.
#   bench/daemon/load.sh [BUILD_DIR] [FINISHED_JOBS]
# Each job is `true`: what is measured is colod (API, store, scheduler, launching real processes
# through colo-shim), not the jobs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
finished_target="${2:-100000}"
bin="$(cd "$build/bin" && pwd)"
work="$(mktemp -d /tmp/colo-load-XXXXXX)"
chmod 711 "$work"
socket="$work/run/colod.sock"
cat > "$work/colod.toml" <<TOML
[scheduler]
policy = "worst-fit"
launch_grace = "0s"
sample_interval = "1s"
[gates]
memory_margin = "1MiB"
[mps]
enabled = false
[paths]
state_dir = "$work/state"
socket = "$socket"
[limits]
max_clients = 256
TOML
"$bin/colod" --config "$work/colod.toml" --fake-gpus 4 > "$work/colod.log" 2>&1 &
colod=$!
cleanup() { kill "$colod" 2>/dev/null || true; wait "$colod" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.1; done
export COLO_SOCKET="$socket"
rss() { awk '/^VmRSS|^VmHWM/ {printf "%s %.1f MiB  ", $1, $2/1024}' "/proc/$colod/status"; echo; }
wait_idle() {  # until no job is queued or running
  while :; do
    n=$("$bin/colo" queue --json | grep -o '"id":' | wc -l || true)
    [ "$n" -eq 0 ] && return
    sleep 1
  done
}
ids="$work/ids.txt"
echo "== machine: $(nproc) cores, $(uname -r); colod $(sed -n 's/.*\(cgroup[^:]*\).*/\1/p' "$work/colod.log" | head -1)"
echo "== 1,000 concurrent submits (16 connections)"
"$bin/colo-loadgen" --socket "$socket" submit --jobs 1000 --clients 16 --workdir "$work" --ids "$ids"
echo "== 10,000 sequential submits (one connection)"
"$bin/colo-loadgen" --socket "$socket" submit --jobs 10000 --clients 1 --workdir "$work" --ids "$ids"
t0=$(date +%s)
wait_idle
echo "   all 11,000 ran in $(( $(date +%s) - t0 )) s after the last submit"
"$bin/colo-loadgen" --socket "$socket" verify --ids "$ids"
echo -n "   colod memory: "; rss
left=$(( finished_target - 11000 ))
if [ "$left" -gt 0 ]; then
  echo "== $left more jobs, to $finished_target finished"
  t0=$(date +%s)
  while [ "$left" -gt 0 ]; do
    batch=$(( left < 5000 ? left : 5000 ))
    "$bin/colo-loadgen" --socket "$socket" submit --jobs "$batch" --clients 4 --workdir "$work" \
      --ids "$work/more.txt" > "$work/batch.log" || { cat "$work/batch.log"; exit 1; }
    left=$(( left - batch ))
    wait_idle
  done
  echo "   ran in $(( $(date +%s) - t0 )) s"
  cat "$ids" "$work/more.txt" > "$work/all.txt"
  "$bin/colo-loadgen" --socket "$socket" verify --ids "$work/all.txt"
fi
echo -n "== colod memory after $finished_target finished jobs: "; rss
echo "   state database: $(du -h "$work/state/colo.db" | cut -f1) (+ WAL $(du -h "$work/state/colo.db-wal" | cut -f1))"
echo "== history of every job read in full, again and again, while another client says hello"
"$bin/colo-loadgen" --socket "$socket" history-stall --seconds 30
