#!/usr/bin/env bash
# Fuzzes pipewright's readers of outside input with libFuzzer (clang): scripts/fuzz.sh [-t SECONDS] [TARGET...]
# Builds build-fuzz/ (PIPEWRIGHT_FUZZ: ASan + UBSan + coverage), assembles each target's seeds, then runs each
# named target (default: all) for SECONDS (default 60), one after another. An input that crashes, trips a
# sanitizer, allocates more than 2 GB (-malloc_limit_mb / -rss_limit_mb) or runs longer than 10 s (-timeout)
# is a finding: it lands in fuzz-out/crashes/<target>/ (the run goes on, -fork=1 with -ignore_*), and the
# script exits 1. Corpora grow in fuzz-out/corpus/<target>/ and are reused by the next run. Turn each finding
# into a regression input: copy it to tests/fuzz/regressions/<target>/ (test_fuzz replays them).
# Environment: FUZZ_OUT (default fuzz-out), PIPEWRIGHT (the CLI that writes seeds, default build/cli/pipewright),
# JOBS (build jobs, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/instrumented-build.sh
source scripts/instrumented-build.sh

all_targets=(model_json hf_config cluster plan profile calibration schedule_json schedule_csv run_record run_trace
             message_wire record_wire)
seconds=60
while getopts "t:" opt; do
  case "$opt" in
    t) seconds="$OPTARG" ;;
    *) echo "usage: scripts/fuzz.sh [-t SECONDS] [TARGET...] (targets: ${all_targets[*]})" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target '$t' (targets: ${all_targets[*]})" >&2; exit 2; }
done
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang++ and libFuzzer (bash scripts/install-deps.sh)" >&2; exit 2; }

build=build-fuzz
out="${FUZZ_OUT:-fuzz-out}"
instrumented_build "$build" fuzzers -DCMAKE_CXX_COMPILER=clang++ -DPIPEWRIGHT_FUZZ=ON

# Seeds: the repository's files (tests/fuzz/seeds.txt), what the writers make, and what the CLI writes for the
# bundled tiny model. Rebuilt on every run; the corpora are kept.
seeds="$out/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"
grep -vE '^\s*(#|$)' tests/fuzz/seeds.txt | while read -r target path; do
  mkdir -p "$seeds/$target"
  cp "$path" "$seeds/$target/"
done
"$build/tests/fuzz/fuzz_seeds" "$seeds" >/dev/null
# The CLI of the ordinary build writes them (an instrumented one would only be slower).
pw="${PIPEWRIGHT:-build/cli/pipewright}"
[ -x "$pw" ] || { echo "fuzz.sh: no $pw for the seeds; build it first: cmake --build build --target pipewright" >&2; exit 2; }
model=examples/tiny-llama.json
mkdir -p "$seeds"/{plan,profile,calibration,run_record,run_trace}
"$pw" plan --model "$model" --cluster ideal --gpus 2 --global-batch-size 4 --out "$seeds/plan/plan.json" >/dev/null
"$pw" profile --model "$model" --micro-batch-size 1 2 --out "$seeds/profile/profile.json" >/dev/null
"$pw" run --model "$model" --cluster ideal --pp 2 --microbatches 2 --iterations 2 --warmup 0 --no-profile --json \
  --trace "$seeds/run_trace/trace.json" >"$seeds/run_record/run.json"
"$pw" calibrate --profile "$seeds/profile/profile.json" --runs "$seeds/run_record/run.json" \
  --traces "$seeds/run_trace/trace.json" --out "$seeds/calibration/calibration.json" >/dev/null

found=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t" "$out/crashes/$t" "$out/logs"
  log="$out/logs/$t.log"
  echo "fuzz.sh: $t for ${seconds} s" >&2
  dict=()
  case "$t" in
    schedule_csv) dict=(-dict=tests/fuzz/csv.dict) ;;
    message_wire | record_wire) ;;
    *) dict=(-dict=tests/fuzz/json.dict) ;;
  esac
  nice -n 10 "$build/tests/fuzz/fuzz_$t" "${dict[@]}" -print_funcs=0 -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$out/crashes/$t/" "$out/corpus/$t" "$seeds/$t" >"$log" 2>&1 || true
  # Fork mode's status lines: "#<executions>: cov: ... exec/s: ... oom/timeout/crash: a/b/c ...".
  execs=$(grep -oE '^#[0-9]+:' "$log" | tail -n 1 | tr -d '#:')
  crashes=$(find "$out/crashes/$t" -type f | wc -l)
  [ "$crashes" -eq 0 ] || found=1
  summary+=("$(printf '%-14s %6s s %12s executions %6s corpus %4s findings' "$t" "$seconds" "${execs:-0}" \
               "$(find "$out/corpus/$t" -type f | wc -l)" "$crashes")")
done
printf '%s\n' "${summary[@]}"
if [ "$found" -ne 0 ]; then
  echo "fuzz.sh: findings under $out/crashes/ (logs: $out/logs/)" >&2
  exit 1
fi
