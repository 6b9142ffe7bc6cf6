#!/usr/bin/env bash
# The 36-job mixed workload (bench.py) on the 3-node test cluster of tests/slurm/cluster.sh, side
# by side: colo's jobs (--colo-mem, colo's SPANK plugin and a colod per node) and Slurm's own shard
# jobs (--gres=shard, a cluster without colo's plugin), alternating, ROUNDS of each.
#
#   bench/slurm-mixed/run.sh [OUT_DIR] [ROUNDS]     (default bench/slurm-mixed/out, 1)
#
# Needs root, Slurm 22.05 and munge (scripts/install-deps.sh slurm), the users colo-alice and
# colo-bob, and a build (build/bin/colod, build/bin/colo, build/lib/colo_spank.so). Takes the
# machine's Slurm test lock (tests/slurm/harness.py's). BIN_DIR: where colod, colo and
# colo_spank.so are (default: build/bin and build/lib). Writes OUT_DIR/{colo,shard}-R.jobs.csv,
# OUT_DIR/{colo,shard}-R.summary.json and OUT_DIR/machine.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
out=$(realpath -m "${1:-$here/out}")
rounds=${2:-1}

[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (the test cluster)" >&2; exit 1; }
bins=("$source_dir/build/bin/colod" "$source_dir/build/bin/colo" "$source_dir/build/lib/colo_spank.so")
[ -z "${BIN_DIR:-}" ] || bins=("$BIN_DIR/colod" "$BIN_DIR/colo" "$BIN_DIR/colo_spank.so")
for f in "${bins[@]}"; do
  [ -e "$f" ] || { echo "run.sh: no $f (build first)" >&2; exit 1; }
done
lock_dir=/run/lock
[ -d "$lock_dir" ] || lock_dir=${TMPDIR:-/tmp}
exec 8>>"$lock_dir/colo-slurm-tests.lock"
flock -w 900 8 || { echo "run.sh: another Slurm cluster runs for more than 15 minutes" >&2; exit 1; }

dir=$(mktemp -d /tmp/colo-slurm-mixed.XXXXXX)
chmod 0755 "$dir"
mkdir -p "$dir/bin" "$out"
cp "${bins[@]}" "$dir/bin/"
shim=$(dirname "${bins[0]}")/colo-shim
[ ! -e "$shim" ] || cp "$shim" "$dir/bin/"
chmod 0755 "$dir/bin" "$dir"/bin/*
cluster() {  # cluster SPANK COMMAND DIR
  local spank=$1
  shift
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    COLOD="$dir/bin/colod" ${spank:+COLO_SPANK=$spank} \
    "$source_dir/tests/slurm/cluster.sh" "$@" 8>&-
}
cleanup() {
  cluster "" down "$dir/cluster" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

{
  echo "date: $(date -Is)"
  echo "host: $(uname -srm), nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "source: $(git -C "$source_dir" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "command: $0 $out $rounds"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"
status=0
for round in $(seq "$rounds"); do
  for kind in colo shard; do
    spank=""
    [ "$kind" = shard ] || spank=$dir/bin/colo_spank.so
    rm -rf "$dir/cluster"
    cluster "$spank" up "$dir/cluster" >&2
    [ -n "$spank" ] || echo "round $round: $kind (no colo plugin)" >&2
    COLO_BIN="$dir/bin/colo" python3 "$here/bench.py" "$dir/cluster" "$out" --kind "$kind" \
      --label "$kind-$round" 8>&- || status=$?
    cluster "" down "$dir/cluster" >&2
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
exit $status
