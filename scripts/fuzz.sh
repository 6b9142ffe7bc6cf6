#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers of hostile text (tests/fuzz) with libFuzzer, under ASan
# and UBSan: builds every target with clang in build-fuzz, runs each for SECONDS_PER_TARGET
# (default 30) from a scratch copy of its seed corpus (the repository is not modified), and exits
# non-zero naming the crashing input if any target fails.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]
# Reproduce a crash: build-fuzz/bin/TARGET build-fuzz/fuzz-crashes/TARGET/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET]" >&2
  exit 2
fi
build="${FUZZ_BUILD:-build-fuzz}"

./scripts/install-deps.sh fuzz
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCOLO_FUZZ=ON -DCOLO_BENCHMARKS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target colo_fuzz_targets

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=()
while read -r target; do
  [ -n "$target" ] || continue
  corpus="$scratch/corpus/$target"
  crashes="$build/fuzz-crashes/$target"
  mkdir -p "$corpus"
  rm -rf "$crashes" && mkdir -p "$crashes"
  if [ -d "tests/fuzz/corpus/$target" ]; then cp -R "tests/fuzz/corpus/$target/." "$corpus/"; fi
  log="$scratch/$target.log"
  echo "fuzz: $target for ${seconds}s"
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: 2 GiB is a leak or a blow-up.
  if "$build/bin/$target" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$crashes/" -print_final_stats=1 >"$log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|new_units_added)' "$log" | sed "s/^/  /" || true
  else
    tail -n 60 "$log" >&2
    found=$(find "$crashes" -type f | head -n 1)
    echo "fuzz: $target FAILED on ${found:-an input libFuzzer did not save} (log above)" >&2
    failed+=("$target")
  fi
done <"$build/tests/fuzz/targets.txt"

if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: crashes in ${failed[*]}; inputs under $build/fuzz-crashes/" >&2
  exit 1
fi
echo "fuzz: no crashes"
