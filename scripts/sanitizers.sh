#!/usr/bin/env bash
# Sanitizer builds of the test suite, run with ctest: ASan + UBSan over every test (build-asan/), then TSan over
# the executor's and the planner's tests (build-tsan/: the code with threads of its own, the executor's ranks and
# the configuration search's workers). Any sanitizer report fails its
# test and so the script. What the sanitizers report inside OpenMPI (not pipewright's code) is suppressed by
# scripts/sanitizers/*.supp, each line with its reason. Usage: scripts/sanitizers.sh [asan|tsan]... (default:
# both). Environment: JOBS (build and ctest jobs, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/instrumented-build.sh
source scripts/instrumented-build.sh

supp="$PWD/scripts/sanitizers"
asan_options="halt_on_error=1:detect_leaks=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"

# The tests that start processes under mpirun: their names begin with "mpirun" (tests/executor/mpi_run_test.cpp).
# Only they load OpenMPI's components, whose leaks lsan.supp can match only in full stacks (OpenMPI is built
# without frame pointers): the slow unwinder at every allocation, which would make the rest of the suite 10 to
# 60 times slower. A test elsewhere that started MPI would fail its leak check, not pass unseen.
mpi_tests='^mpirun'

# ctest lists every test area; a build of some of them names the others *_NOT_BUILT. Arguments: the build
# folder, then ctest's selection.
run_suite() {
  local dir="$1"
  shift
  ctest --test-dir "$dir" --output-on-failure -j "${JOBS:-2}" "$@"
}

builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=(asan tsan)
for b in "${builds[@]}"; do
  start=$SECONDS
  case "$b" in
    asan)
      instrumented_build build-asan all -DPIPEWRIGHT_SANITIZE=address,undefined
      ASAN_OPTIONS="$asan_options" run_suite build-asan -E "_NOT_BUILT|$mpi_tests"
      ASAN_OPTIONS="$asan_options:fast_unwind_on_malloc=0" run_suite build-asan -R "$mpi_tests" ;;
    tsan)
      instrumented_build build-tsan "test_executor test_planner pipewright" -DPIPEWRIGHT_SANITIZE=thread
      # Only those are built: the tests registered by hand for other programs (the kernel-table validation and
      # its imports, the Python and script tests) are not this build's; the option walk's runs are for ASan and
      # UBSan to check.
      run_suite build-tsan -E '_NOT_BUILT|^validation\.|^python\.|^scripts\.|^cli\.option_walk' ;;
    *) echo "sanitizers.sh: no build '$b' (asan, tsan)" >&2; exit 2 ;;
  esac
  echo "sanitizers.sh: $b clean in $((SECONDS - start)) s" >&2
done
