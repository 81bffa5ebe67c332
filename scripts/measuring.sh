# Sourced by the scripts that measure on this machine (bench/fidelity.sh, scripts/calibration-check.sh).
# `measuring_setup NAME [BUILD_DIR]` sets root (the repository), pw (BUILD_DIR's pipewright binary,
# default build) and work (a fresh folder NAME.XXXXXX under TMPDIR, removed on exit unless KEEP=1, when
# its path is printed); it exits 2 with one line naming what is missing when the binary or python3 is.
# shellcheck shell=bash disable=SC2034
measuring_setup() {
  local name="$1" build="${2:-build}"
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  [[ "$build" = /* ]] || build="$PWD/$build"
  pw="$build/cli/pipewright"
  if [[ ! -x "$pw" ]]; then
    echo "$name: no $pw; build it first: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && make -C build pipewright" >&2
    exit 2
  fi
  command -v python3 >/dev/null || { echo "$name: needs python3" >&2; exit 2; }
  work="$(mktemp -d "${TMPDIR:-/tmp}/pipewright-${name%.sh}.XXXXXX")"
  if [[ "${KEEP:-0}" == 1 ]]; then
    echo "$name: keeping $work" >&2
  else
    trap 'rm -rf "$work"' EXIT
  fi
}
