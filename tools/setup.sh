#!/usr/bin/env bash
# Installs every Debian package that building, testing and `make run` need.
# Idempotent: when everything is present it checks with dpkg-query and installs nothing.
set -euo pipefail

packages=(
  cmake make g++ clang pkg-config git
  libbenchmark-dev libbenchmark-tools   # timing (Google Benchmark) and its compare.py
  nlohmann-json3-dev libvalijson-dev    # JSON documents and JSON Schema validation
  libeigen3-dev libopenblas-dev         # peer kernels
  libboost-math-dev libboost-random-dev # statistics and portable normal sampling
  doctest-dev                           # tests
  librandom123-dev                      # Philox counter-based RNG
  libhwy-dev                            # portable SIMD with run-time dispatch
  libcli11-dev                          # command line
  libssl-dev                            # SHA-256 of configs (OpenSSL EVP)
  gnuplot-nox                           # plots
  clang-tidy clang-format               # make lint
  libclang-rt-14-dev libomp-dev         # make fuzz: libFuzzer and ASan runtimes, OpenMP for clang
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
# A fresh machine has no package lists; apt-get install finds nothing before an update.
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
