#!/usr/bin/env bash
# The Debian libraries pipewright builds with, carried to a GPU machine that has CUDA, CMake and a compiler but
# no network and none of them (Boost, Eigen, CLI11, fmt, nlohmann/json, Catch2; all used from their headers
# there, fmt too, so nothing built for this machine's C library has to load there).
#   scripts/gpu-deps.sh download          here: the packages' .deb files into .gpu-deps/ (ignored by git; carry it),
#                                         and AIConfigurator's published GEMM tables of H100, H200 and B200 into
#                                         .gpu-deps/kernels/ (the GPU check compares its own sweep with them; the
#                                         importer needs pyarrow, which a GPU machine's PyTorch does not bring)
#   scripts/gpu-deps.sh unpack PREFIX     there: unpacks .gpu-deps/*.deb into PREFIX (dpkg-deb, or ar and tar);
#                                         prints the CMake arguments that build against PREFIX alone
#   scripts/gpu-deps.sh rehearse [DIR]    here: unpacks into DIR/prefix and builds pipewright and test_cuda in
#                                         DIR/build against that prefix, the system's copies kept out of CMake's
#                                         search (CMAKE_IGNORE_PREFIX_PATH), as scripts/gpu-check.sh will there
# OpenMPI is left out: its runtime is not header-only and the 2-process step needs 2 GPUs anyway.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
debs=${PIPEWRIGHT_GPU_DEPS:-$root/.gpu-deps}  # the folder of .deb files (another for the tests)
# The -dev packages by their unversioned names, and two versioned ones found by asking apt: libboost-dev is a
# metapackage whose headers are in libboost1.74-dev (Debian 12), and fmt's CMake file refuses to load unless
# its shared library (libfmt9) is there, though the header-only target never links it.
packages=(libboost-dev libeigen3-dev libcli11-dev libfmt-dev nlohmann-json3-dev catch2)

# dependency PACKAGE REGEX: the package PACKAGE depends on whose name matches REGEX.
dependency() {
  local name
  name=$(apt-cache depends "$1" | awk -v re="$2" '$1 == "Depends:" && $2 ~ re { print $2; exit }')
  [ -n "$name" ] || { echo "gpu-deps: error: apt finds no dependency of $1 like $2 (run apt-get update)" >&2; exit 1; }
  echo "$name"
}

download() {
  mkdir -p "$debs"
  local names=("${packages[@]}")
  names+=("$(dependency libboost-dev '^libboost[0-9.]+-dev$')" "$(dependency libfmt-dev '^libfmt[0-9]+$')")
  rm -f "$debs"/*.deb
  (cd "$debs" && apt-get download -qq "${names[@]}")
  published_tables
  echo "gpu-deps: $(find "$debs" -name '*.deb' | wc -l) packages and the tables, $(du -sh "$debs" | cut -f1), in $debs"
}

# The published GEMM tables (vLLM's, about 7 MB a GPU), from the pinned aiconfigurator-core in .venv.
published_tables() {
  local py=$root/.venv/bin/python3 system
  if [ ! -x "$py" ]; then
    echo "gpu-deps: no .venv (scripts/install-deps.sh makes it): no published tables carried" >&2
    return
  fi
  rm -rf "$debs/kernels"
  mkdir -p "$debs/kernels"
  for system in h100_sxm h200_sxm b200_sxm; do
    PYTHONPATH=$root/python "$py" -B -m pipewright.kernels.aiconfigurator --system "$system" --backend vllm \
      --kinds gemm_perf --out "$debs/kernels/$system-vllm" > /dev/null
  done
}

# unpack_one DEB PREFIX: a .deb is an ar archive whose data.tar.* holds the files.
unpack_one() {
  local deb=$1 prefix=$2
  if command -v dpkg-deb > /dev/null; then
    dpkg-deb -x "$deb" "$prefix"
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && ar x "$deb")
  tar -xf "$tmp"/data.tar.* -C "$prefix"
  rm -rf "$tmp"
}

# cmake_args PREFIX: what a build against the unpacked packages alone needs.
cmake_args() {
  echo "-DCMAKE_PREFIX_PATH=$1/usr -DCMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local -DPIPEWRIGHT_FMT_HEADER_ONLY=ON"
}

unpack() {
  local prefix=$1 deb count=0
  shopt -s nullglob
  local files=("$debs"/*.deb)
  [ ${#files[@]} -gt 0 ] || { echo "gpu-deps: error: no .deb in $debs (run scripts/gpu-deps.sh download here)" >&2; exit 1; }
  mkdir -p "$prefix"
  for deb in "${files[@]}"; do
    unpack_one "$deb" "$prefix"
    count=$((count + 1))
  done
  echo "gpu-deps: $count packages unpacked into $prefix" >&2
  cmake_args "$prefix"
}

rehearse() {
  local dir=${1:-/tmp/pipewright-gpu-deps}
  rm -rf "$dir"
  local args
  args=$(unpack "$dir/prefix")
  # shellcheck disable=SC2086 # the arguments are words without spaces
  # No MPI: the prefix has none, and neither has the GPU machine this rehearses.
  cmake -S "$root" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DPIPEWRIGHT_BUILD_BENCH=OFF -DPIPEWRIGHT_MPI=OFF $args
  cmake --build "$dir/build" -j "$(nproc)" --target pipewright test_cuda
  # Every package must have come from the prefix, none from the system.
  if grep -E "^(fmt|nlohmann_json|CLI11|Eigen3|Boost|Catch2)_DIR:" "$dir/build/CMakeCache.txt" | grep -v "$dir/prefix"; then
    echo "gpu-deps: error: the packages above were found outside $dir/prefix" >&2
    exit 1
  fi
  grep -E "^(fmt|nlohmann_json|CLI11|Eigen3|Boost|Catch2)_DIR:" "$dir/build/CMakeCache.txt"
  echo "gpu-deps: built against $dir/prefix alone"
}

case "${1:-}" in
  download) download ;;
  unpack) [ $# -eq 2 ] || { echo "gpu-deps: error: unpack needs a PREFIX folder" >&2; exit 2; }; unpack "$2" ;;
  rehearse) rehearse "${2:-}" ;;
  *) echo "usage: scripts/gpu-deps.sh download | unpack PREFIX | rehearse [DIR]" >&2; exit 2 ;;
esac
