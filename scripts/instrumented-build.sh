# Sourced by scripts/fuzz.sh and scripts/sanitizers.sh. `instrumented_build DIR "TARGETS" CMAKE_ARGS...`
# configures DIR (relative to the repository root) for an instrumented build: -O1 -g1 (line tables, enough
# for every report's stack; a third less compile time than -g) with assertions kept,
# CUDA and benchmarks off, ccache when present; then builds TARGETS (space-separated) niced, with
# JOBS (default 2) jobs, so that a shared machine keeps a core for others.
# shellcheck shell=bash
instrumented_build() {
  local dir="$1" targets="$2"
  shift 2
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
    -DPIPEWRIGHT_CUDA=OFF -DPIPEWRIGHT_BUILD_BENCH=OFF "${launcher[@]}" "$@" >/dev/null
  # shellcheck disable=SC2086
  nice -n 10 cmake --build "$dir" -j "${JOBS:-2}" --target $targets
}
