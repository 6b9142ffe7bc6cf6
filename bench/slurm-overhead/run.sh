#!/usr/bin/env bash
# What colo adds to a Slurm job's start: the time from `sbatch` to the job's first output line,
# with and without colo options, on the 3-node test cluster of tests/slurm/cluster.sh with colo's
# SPANK plugin loaded (build/lib/colo_spank.so) and a colod per node.
#
#   bench/slurm-overhead/run.sh [OUT_DIR] [-- bench.py options]
#       OUT_DIR: default bench/slurm-overhead/out; bench.py options: --jobs N (of each kind,
#       default 200), --wave N (submitted at once, default 10), --colo-options "..." (default
#       "--colo-mem=4GiB --colo-share=mps")
#
# Needs root, Slurm 22.05 and munge (scripts/install-deps.sh slurm), the users colo-alice and
# colo-bob, and a build (build/bin/colod, build/bin/colo, build/lib/colo_spank.so). Takes the
# machine's Slurm test lock (tests/slurm/harness.py's), so that the Slurm tests wait for it and it
# for them. COLO_LAUNCH_GRACE and COLO_WAIT_LIMIT (seconds) reach cluster.sh's colods. BIN_DIR:
# where colod, colo, colo-shim and colo_spank.so are (default: build/bin and build/lib, copied
# once no build runs).
# NO_PLUGIN=1: a cluster without colo's plugin (colods still run, unasked), plain jobs only — the
# baseline of Slurm alone.
#
# Every job is colo-alice's batch script `date +%s.%N` (its first and only line); the latency of a
# job is that line minus the wall time just before its sbatch started. "plain" jobs have no colo
# options (the plugin leaves them alone: checked through every node's colod); "colo" jobs have
# the colo options. Writes OUT_DIR/jobs.csv, OUT_DIR/summary.json, OUT_DIR/machine.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
out=$here/out
if [ $# -gt 0 ] && [ "$1" != -- ]; then
  out=$(realpath -m "$1")
  shift
fi
[ "${1:-}" != -- ] || shift

[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (the test cluster)" >&2; exit 1; }
for f in build/bin/colod build/bin/colo build/lib/colo_spank.so; do
  [ -e "$source_dir/$f" ] || { echo "run.sh: no $f (build first)" >&2; exit 1; }
done

# The Slurm tests' machine lock: one cluster per machine (fixed bridge, namespaces, ports).
lock_dir=/run/lock
[ -d "$lock_dir" ] || lock_dir=${TMPDIR:-/tmp}
exec 8>>"$lock_dir/colo-slurm-tests.lock"
echo "run.sh: waiting for the machine's Slurm test lock" >&2
flock -w 900 8 || { echo "run.sh: another Slurm cluster runs for more than 15 minutes" >&2; exit 1; }

dir=$(mktemp -d /tmp/colo-slurm-bench.XXXXXX)
chmod 0755 "$dir"
trap 'rm -rf "$dir"' EXIT
# A copy of the binaries, so that a rebuild while this runs changes nothing under it (taken
# while no build runs).
mkdir -p "$dir/bin"
if [ -n "${BIN_DIR:-}" ]; then
  cp -p "$BIN_DIR/colod" "$BIN_DIR/colo" "$BIN_DIR/colo_spank.so" "$dir/bin/"
  [ ! -e "$BIN_DIR/colo-shim" ] || cp -p "$BIN_DIR/colo-shim" "$dir/bin/"
else
  for _ in $(seq 600); do pgrep -x ninja >/dev/null || pgrep -x make >/dev/null || break; sleep 1; done
  cp -p "$source_dir/build/bin/colod" "$source_dir/build/bin/colo" "$source_dir/build/lib/colo_spank.so" \
    "$dir/bin/"
  [ ! -e "$source_dir/build/bin/colo-shim" ] || cp "$source_dir/build/bin/colo-shim" "$dir/bin/"
fi
chmod 0755 "$dir/bin" "$dir"/bin/*
spank=$dir/bin/colo_spank.so
plain_only=()
if [ "${NO_PLUGIN:-}" = 1 ]; then
  spank=""
  plain_only=(--plain-only)
fi
cluster() {
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    COLOD="$dir/bin/colod" ${spank:+COLO_SPANK=$spank} \
    ${COLO_LAUNCH_GRACE:+COLO_LAUNCH_GRACE=$COLO_LAUNCH_GRACE} \
    ${COLO_WAIT_LIMIT:+COLO_WAIT_LIMIT=$COLO_WAIT_LIMIT} \
    "$source_dir/tests/slurm/cluster.sh" "$@" 8>&-
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  cluster down "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
# Another cluster (one started by hand, outside the lock) may still be up: wait for it to go.
deadline=$((SECONDS + 900))
until up_log=$(cluster up "$dir" 2>&1); do
  if ! grep -q -e "another cluster runs" -e "serves .* already" <<<"$up_log" || ((SECONDS > deadline)); then
    echo "$up_log" >&2
    exit 1
  fi
  sleep 5
done
echo "$up_log" >&2

mkdir -p "$out"
{
  echo "date: $(date -Is)"
  echo "host: $(uname -srm), nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "slurm: $(env SLURM_CONF="$dir/slurm.conf" sbatch --version)"
  echo "source: $(git -C "$source_dir" rev-parse --short HEAD 2>/dev/null || echo unknown)," \
    "colod of $(date -r "$dir/bin/colod" -Is)," \
    "colo_spank.so of $(date -r "$dir/bin/colo_spank.so" -Is)${BIN_DIR:+ (from $BIN_DIR)}"
  echo "colod: $(tr '\n' ' ' <"$dir/colo/n1/colod.toml")"
  echo "plugstack.conf: $(cat "$dir/plugstack.conf")"
  echo "command: ${NO_PLUGIN:+NO_PLUGIN=1 }${BIN_DIR:+BIN_DIR=$BIN_DIR }$0 $out $*"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"
status=0
COLO_BIN="$dir/bin/colo" python3 "$here/bench.py" "$dir" "$out" "${plain_only[@]}" "$@" 8>&- || status=$?
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
cat "$out/machine.txt"
exit $status
