#!/usr/bin/env bash
# Packs what window.sh needs on a machine that has PyTorch but not colo, into DEST (a folder the
# machine gets a copy of): colo's binaries with the shared libraries a non-Debian host may lack
# (dist/), its data and Python package, these scripts, the profiles and the traces.
#   bench/real-trace/pack.sh DEST TRACE.json FALLBACK.json SOLO.json PROFILES.tgz [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dest=$1 trace=$2 fallback=$3 solo=$4 profiles=$5 build=${6:-$root/build}
rm -rf "$dest"
mkdir -p "$dest/dist/lib" "$dest/bench/real-trace"
cp "$build/bin/colo" "$build/bin/colod" "$build/bin/colo-shim" "$dest/dist/"
for bin in colo colod colo-shim; do
  ldd "$build/bin/$bin" | awk '/=> \// { print $3 }'
done | sort -u | grep -E 'libfmt|libsqlite3' |
  xargs -I{} cp -L {} "$dest/dist/lib/"
cp -r "$root/data" "$root/python" "$root/tools" "$dest/"
cp "$here"/*.py "$here"/*.sh "$here/workloads.json" "$dest/bench/real-trace/"
cp "$trace" "$dest/trace.json"
cp "$fallback" "$dest/trace-fallback.json"
cp "$solo" "$dest/solo.json"
cp "$profiles" "$dest/profiles.tgz"
du -sh "$dest"
