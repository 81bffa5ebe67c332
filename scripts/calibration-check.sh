#!/usr/bin/env bash
# The real-machine calibration check (issue 7): profiles the tiny Llama-style model at micro-batch sizes 1, 2,
# 4 and 8, runs nine pipeline configurations for real on the cpu backend (2 ranks, each configuration
# PASSES times), calibrates on the first six configurations and on b = 1, 2, 4, and prints the prediction
# error on what was held out: the last three configurations' step times (target: median at most 3%) and
# the layers at b = 8 (target: within 5%). Builds nothing.
# Run it on a quiet machine (nothing else compiling): the runs measure wall-clock time on 2 cores.
#
#   scripts/calibration-check.sh [BUILD_DIR]          (default: build)
#
# Environment: MIN_TIME (profiler seconds per layer and size, default 0.5), ITERATIONS (measured iterations
# per run, default 15), WARMUP (default 3), PASSES (runs of each configuration, default 5), QUICK=1
# (MIN_TIME 0.02, 2 iterations, 1 warm-up, 1 pass: checks that the procedure works, its numbers mean
# nothing), KEEP=1 keeps the work folder (profile, runs, traces, calibration.json) and prints where it is.
# docs/calibration.md explains the method.
set -euo pipefail

# shellcheck source=scripts/measuring.sh
source "$(dirname "${BASH_SOURCE[0]}")/measuring.sh"
measuring_setup calibration-check.sh "${1:-build}"
if [[ "${QUICK:-0}" == 1 ]]; then
  min_time=0.02 iterations=2 warmup=1 passes=1
else
  min_time="${MIN_TIME:-0.5}" iterations="${ITERATIONS:-15}" warmup="${WARMUP:-3}" passes="${PASSES:-5}"
fi
model="$root/examples/tiny-llama.json"

echo "## profile: b = 1, 2, 4, 8 (min-time $min_time s)"
"$pw" profile --model "$model" --micro-batch-size 1 2 4 8 --min-time "$min_time" --out "$work/profile.json" >/dev/null

# schedule pp vpp microbatches micro-batch-size. The first six are fitted on, the last three held out
# (--holdout 0.34: round(0.34 x 9 x PASSES) = 3 x PASSES run files, and round(0.34 x 4) = 1 micro-batch
# shape, b = 8).
configs=(
  "1f1b 2 1 8 1"
  "gpipe 2 1 4 2"
  "zb-h1 2 1 8 1"
  "interleaved 2 2 4 1"
  "1f1b 2 1 4 4"
  "zb-h1 2 1 4 2"
  "gpipe 2 1 8 1"
  "interleaved 2 2 8 2"
  "1f1b 2 1 4 8"
)
# Each configuration runs PASSES times, the passes one after the other, so that a machine that speeds up
# or slows down for a while (a VM's neighbours) moves every configuration alike; the files are then listed
# configuration by configuration, so that --holdout still leaves out the last three configurations.
declare -A run_file trace_file
for ((pass = 1; pass <= passes; pass++)); do
  i=0
  for c in "${configs[@]}"; do
    read -r schedule pp vpp m b <<<"$c"
    i=$((i + 1))
    run="$work/run$i-$pass.json" trace="$work/trace$i-$pass.json"
    echo "## run $i pass $pass: $schedule pp $pp vpp $vpp, $m micro-batches of $b"
    "$pw" run --model "$model" --cluster dgx-h100 --schedule "$schedule" --pp "$pp" --vpp "$vpp" --microbatches "$m" \
      --micro-batch-size "$b" --profile "$work/profile.json" --iterations "$iterations" --warmup "$warmup" --json \
      --trace "$trace" >"$run"
    run_file[$i-$pass]="$run" trace_file[$i-$pass]="$trace"
  done
done
runs=() traces=()
for ((i = 1; i <= ${#configs[@]}; i++)); do
  for ((pass = 1; pass <= passes; pass++)); do
    runs+=("${run_file[$i-$pass]}") traces+=("${trace_file[$i-$pass]}")
  done
done

echo
# The check reports the errors whatever they are: a poor fit is written and its `fit check:` line says so.
"$pw" calibrate --profile "$work/profile.json" --runs "${runs[@]}" --traces "${traces[@]}" --holdout 0.34 \
  --accept-poor-fit --out "$work/calibration.json"
echo

python3 - "$work/calibration.json" "$model" <<'PY'
import json, statistics, sys
c = json.load(open(sys.argv[1]))
blocks = json.load(open(sys.argv[2]))["transformer"]["layers"]
def err(p, key):
    return None if p.get(key) is None else (p[key] - p["measured_s"]) / p["measured_s"] * 100
runs = c["held_out"]["runs"]
print("## summary")
print(f"machine: {c['fitted_on']['machine']['device']} ({c['fitted_on']['machine']['cores']} cores)")
print("held-out runs (step time), median |error|:")
for key, name in (("analytic_s", "analytic defaults"), ("profiled_s", "profile alone"), ("calibrated_s", "calibrated")):
    e = [abs(err(p, key)) for p in runs if err(p, key) is not None]
    print(f"  {name:<18} {statistics.median(e):6.2f}%" if e else f"  {name:<18} -")
for p in runs:
    print(f"  {p['what'].split('/')[-1]}: measured {p['measured_s']*1e3:.2f} ms, calibrated {err(p, 'calibrated_s'):+.2f}%")
layers = c["held_out"]["layers"]
# The model's compute per micro-batch at b = 8: embedding + every block + head, F + B + W.
count = {"embedding": 1, "block": blocks, "head": 1}
measured = sum(p["measured_s"] * count[p["what"].split()[0]] for p in layers)
predicted = sum(p["calibrated_s"] * count[p["what"].split()[0]] for p in layers)
big = [abs(err(p, "calibrated_s")) for p in layers if p["what"].split()[0] != "embedding"]
print("b = 8 from the fit on b = 1, 2, 4:")
if layers:
    print(f"  model F+B+W per micro-batch (embedding + {blocks} blocks + head): measured {measured*1e3:.3f} ms, "
          f"predicted {predicted*1e3:.3f} ms, error {(predicted - measured) / measured * 100:+.2f}%")
    print(f"  block and head phases: largest |error| {max(big):.2f}%, median {statistics.median(big):.2f}%")
PY
