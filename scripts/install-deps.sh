#!/usr/bin/env bash
# Installs the Debian packages colo builds against, only those that are missing (idempotent).
#   scripts/install-deps.sh [fuzz] [slurm]
#     fuzz:  also clang and libFuzzer, for scripts/fuzz.sh
#     slurm: also Slurm 22.05 and munge, for the test cluster of tests/slurm (cluster.sh)
#     metrics: also promtool and jsonschema, to check /metrics, the alert rules and the dashboard
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config
  libcli11-dev          # command-line parsing for colo
  nlohmann-json3-dev    # JSON output and the Philly trace importer
  libfmt-dev            # string formatting
  libgtest-dev libgmock-dev  # unit, conformance and integration tests
  libbenchmark-dev      # scheduler and simulator benchmarks
  libsqlite3-dev        # colod's state database
  libtomlplusplus-dev   # colod's configuration file
  libjs-chart.js        # charts of the HTML reports, embedded at build time
  chromium              # the browser check of the HTML reports (tests/e2e/test_report_browser.py)
  libncurses-dev        # colo top's terminal view
  tmux                  # colo top's end-to-end test (a terminal of a fixed size)
  python3               # end-to-end tests (tests/e2e, standard library only)
  util-linux mount passwd  # setpriv, mount (e2e tests), useradd (CI's test users)
)
for group in "$@"; do
  case "$group" in
    fuzz) packages+=(clang libclang-rt-14-dev) ;;  # libFuzzer comes with clang's runtime
    # slurm-wlm-basic-plugins (job_submit/lua, with liblua5.1) comes with slurmctld;
    # libslurm-dev has slurm/spank.h; iproute2 makes the test cluster's network namespaces.
    slurm) packages+=(slurmctld slurmd slurm-client munge libslurm-dev iproute2) ;;
    # promtool comes with Debian's prometheus server (not started here: no systemd in CI).
    metrics) packages+=(prometheus python3-jsonschema) ;;
    *)
      echo "install-deps.sh: unknown group '$group' (known: fuzz, slurm, metrics)" >&2
      exit 2
      ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
