#!/usr/bin/env bash
# Installs every Debian package pipewright's build, tests and benchmarks need.
set -euo pipefail
packages=(
  build-essential cmake python3-venv python3-dev  # python3-dev: the headers the pipewright module builds against
  libboost-graph-dev libeigen3-dev libcli11-dev libfmt-dev nlohmann-json3-dev catch2
  libbenchmark-dev libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev  # libFuzzer and clang's sanitizer runtimes, for scripts/fuzz.sh
  valgrind  # callgrind's counts for the simulator's speed guard, bench/sim_guard.sh
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Python side: a virtual environment in the source tree (.venv, ignored by git) with the pinned packages
# of python/requirements*.txt; `pipewright kernels import` runs in it. Made again when the pins change.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$root/.venv
pins=$(cat "$root/python/requirements.txt" "$root/python/requirements-data.txt" "$root/python/requirements-parsers.txt")
if [ "$pins" != "$(cat "$venv/pins.txt" 2>/dev/null)" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check -r "$root/python/requirements.txt"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check --no-deps -r "$root/python/requirements-data.txt" \
    -r "$root/python/requirements-parsers.txt"
  echo "$pins" > "$venv/pins.txt"
fi
echo "install-deps: Python packages pinned in python/requirements*.txt are in $venv"
