#!/usr/bin/env bash
# One user floods a system colod on every connection one user is allowed (submits, every user's
# history page after page, hold/release of 1,000 jobs at once, held 1,000-task arrays with a 250 KB
# environment and a 32 KB command, each cancelled again) while another user asks for the queue
# every 50 ms: that user's latencies (p50/p99) and colod's memory, first for one such array alone
# on a fresh colod (kept, held, through the flood). Run as
# root with two ordinary users (default colo-alice and colo-bob, as .ci/run makes them); fake GPUs,
# no GPU needed. Prints a report; the numbers are measured, not asserted. ROLES (e.g. `flip`, or
# `submit,history`) floods with those kinds of request only; by default all four in turn.
#   bench/daemon/fairness.sh [BUILD_DIR] [SECONDS] [FLOODER] [PROBER] [ROLES]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
seconds="${2:-60}"
flooder="${3:-colo-alice}"
prober="${4:-colo-bob}"
roles="${5:-submit,history,flip,array}"
[ "$(id -u)" -eq 0 ] || { echo "fairness.sh: run it as root (a system colod, two users)" >&2; exit 2; }
bin="$(cd "$build/bin" && pwd)"
work="$(mktemp -d /tmp/colo-fair-XXXXXX)"
chmod 711 "$work"
# The binaries where both users may run them.
mkdir "$work/bin" && chmod 755 "$work/bin"
cp "$bin/colod" "$bin/colo" "$bin/colo-shim" "$bin/colo-loadgen" "$work/bin/"
chmod 755 "$work/bin/"*
bin="$work/bin"
mkdir -p "$work/run" && chmod 755 "$work/run"
socket="$work/run/colod.sock"
for u in "$flooder" "$prober"; do mkdir -p "$work/$u"; chown "$u" "$work/$u"; done
cat > "$work/colod.toml" <<TOML
[scheduler]
launch_grace = "0s"
sample_interval = "1s"
[gates]
memory_margin = "1MiB"
[mps]
enabled = false
[paths]
state_dir = "$work/state"
socket = "$socket"
TOML
"$bin/colod" --config "$work/colod.toml" --fake-gpus 4 > "$work/colod.log" 2>&1 &
colod=$!
cleanup() { kill "$colod" 2>/dev/null || true; wait "$colod" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.1; done
as() { local user="$1"; shift; setpriv --reuid "$user" --regid "$(id -g "$user")" --init-groups -- "$@"; }
rss() { awk '/^VmRSS|^VmHWM/ {printf "%s %.1f MiB  ", $1, $2/1024}' "/proc/$colod/status"; echo; }
echo "== machine: $(nproc) cores, $(uname -r); $(sed -n 's/^colod: \(cgroup v2\|no cgroups\).*/\1/p' "$work/colod.log" | head -1)"
echo -n "== colod at start: "; rss
echo "== one held 1,000-task array with a 250 KB environment and a 32 KB command, on the fresh colod"
before=$(awk '/^VmRSS/ {print $2}' "/proc/$colod/status")
as "$flooder" "$bin/colo-loadgen" --socket "$socket" flood --seconds 1 --workdir "$work/$flooder" \
  --connections 1 --roles array-keep
after=$(awk '/^VmRSS/ {print $2}' "/proc/$colod/status")
echo "   colod's RSS grew by $(awk "BEGIN {printf \"%.1f\", ($after - $before) / 1024}") MiB" \
  "($((before / 1024)) to $((after / 1024)) MiB); database now $(du -ch "$work/state/colo.db"* | tail -1 | cut -f1) with its WAL"
echo "== $prober's queue alone for 10 s"
as "$prober" "$bin/colo-loadgen" --socket "$socket" probe --seconds 10
echo "== $flooder floods on 32 connections ($roles) for $seconds s while $prober asks for the queue"
as "$flooder" "$bin/colo-loadgen" --socket "$socket" flood --seconds "$seconds" \
  --workdir "$work/$flooder" --connections 32 --roles "$roles" > "$work/flood.txt" &
flood=$!
sleep 2
as "$prober" "$bin/colo-loadgen" --socket "$socket" probe --seconds "$((seconds - 4))" || true
wait "$flood" || true
cat "$work/flood.txt"
echo -n "== colod after the flood: "; rss
echo "   state database: $(du -h "$work/state/colo.db" | cut -f1) (+ WAL $(du -h "$work/state/colo.db-wal" 2>/dev/null | cut -f1))"
