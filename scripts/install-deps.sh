#!/usr/bin/env bash
# Installs every Debian package pipewright's build, tests and benchmarks need.
set -euo pipefail
packages=(
  build-essential cmake
  libboost-graph-dev libeigen3-dev libcli11-dev libfmt-dev nlohmann-json3-dev catch2
  libbenchmark-dev libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev  # libFuzzer and clang's sanitizer runtimes, for scripts/fuzz.sh
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
