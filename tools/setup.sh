#!/usr/bin/env bash
# Installs the Debian packages the build needs. Idempotent: when everything is present it checks
# with dpkg-query and installs nothing.
#   tools/setup.sh           building and running sdpa-bench (make run)
#   tools/setup.sh --test    also the test suite's and the developer tools' (make test, lint, fuzz)
#   tools/setup.sh --arm64   also the aarch64 cross-build and its emulated tests (make test-arm64)
set -euo pipefail

arm64=false test=false
for flag in "$@"; do
  case "$flag" in
    --arm64) arm64=true ;;
    --test) test=true ;;
    *) echo "usage: tools/setup.sh [--test] [--arm64]" >&2; exit 2 ;;
  esac
done

packages=(
  cmake make g++ pkg-config git
  libbenchmark-dev                      # timing (Google Benchmark)
  nlohmann-json3-dev libvalijson-dev    # JSON documents and JSON Schema validation
  libeigen3-dev libopenblas-dev         # peer kernels
  libboost-math-dev libboost-random-dev # statistics and portable normal sampling
  doctest-dev                           # tests (configured with the build, header-only)
  librandom123-dev                      # Philox counter-based RNG
  libhwy-dev                            # portable SIMD with run-time dispatch
  libcli11-dev                          # command line
  libssl-dev                            # SHA-256 of configs (OpenSSL EVP)
  gnuplot-nox                           # plots
)

if $test; then
  packages+=(
    slurmctld slurmd slurm-client munge   # test_slurm: a one-node Slurm on loopback runs a sweep
    clang-tidy clang-format               # make lint
    clang libclang-rt-14-dev libomp-dev   # make fuzz: clang, libFuzzer and ASan runtimes, OpenMP
    libbenchmark-tools                    # Google Benchmark's compare.py (reads --benchmark-json)
    chromium                              # test_site: the results site in a headless browser
  )
fi

if $arm64; then
  packages+=(
    crossbuild-essential-arm64 qemu-user-static   # cross compiler; runs arm64 binaries on x86
    # The arm64 builds of the libraries above that are not architecture-independent (multiarch);
    # libgomp1 and libstdc++6 are what the emulated executables load at run time.
    libbenchmark-dev:arm64 libopenblas-dev:arm64 libboost-math-dev:arm64
    libboost-random-dev:arm64 libhwy-dev:arm64 libssl-dev:arm64 libgomp1:arm64 libstdc++6:arm64
  )
fi

# A name without ":arch" means the native package or an architecture-independent one; asked
# without an architecture, dpkg-query answers once per installed architecture instead.
native=$(dpkg --print-architecture)
installed() {
  local query=$1 status
  [[ $1 == *:* ]] || query="$1:$native"
  status=$(dpkg-query -W -f='${Status}' "$query" 2>/dev/null ||
    dpkg-query -W -f='${Status}' "$1:all" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]]
}

# ggml (llama.cpp's) from the npm registry, for the native build's ggml peer entries.
$arm64 || "$(dirname "$0")/fetch_ggml.sh"

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
# arm64 packages need the architecture known to dpkg before the update below lists them.
if $arm64 && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64
fi
# A fresh machine has no package lists; apt-get install finds nothing before an update.
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
