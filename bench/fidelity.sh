#!/usr/bin/env bash
# Predicted vs measured step time and activation peak (per rank) on this machine: profiles the tiny Llama-style
# model, then runs gpipe, 1f1b, interleaved and zb-h1 with uneven splits through `pipewright run --json` (2 ranks
# with real compute; 4 and 8 ranks with sleep compute; 2 processes under mpirun, and 2 under torchrun's variables
# joined over TCP) and prints one markdown table. Builds nothing.
#
#   bench/fidelity.sh [BUILD_DIR]          (default: build)
#
# Environment: ITERATIONS (measured iterations per row, default 20), WARMUP (default 3), KEEP=1 keeps the
# work folder (the profile and every run's JSON) and prints where it is.
# docs/validation.md ("Predicted vs measured on this machine") explains the method and records the table.
set -euo pipefail

# shellcheck source=scripts/measuring.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/measuring.sh"
measuring_setup fidelity.sh "${1:-build}"
iterations="${ITERATIONS:-20}"
warmup="${WARMUP:-3}"

model="$root/examples/tiny-llama.json"
# The sleep rows reach 8 ranks x 2 chunks: the same model, deeper. Its layers have the tiny model's shapes, so
# the one profile times them all.
deep="$work/tiny-llama-32.json"
python3 - "$model" "$deep" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["name"] += "-32"
m["transformer"]["layers"] = 32
json.dump(m, open(sys.argv[2], "w"), indent=2)
EOF

echo "fidelity.sh: profiling $(basename "$model") on this machine ..." >&2
"$pw" profile --backend cpu --model "$model" --micro-batch-size 1 --out "$work/profile.json" >"$work/profile.txt"

# Uneven split of `blocks` over `stages`: the first stage (with the embedding) takes one block from the last
# (with the head), e.g. 8 over 2: 5,3; 32 over 16: 3,2,...,2,1.
split() {
  python3 -c "b, s = $1, $2
n = [b // s] * s
for i in range(b % s): n[i] += 1
n[0] += 1; n[-1] -= 1
print(','.join(map(str, n)))"
}

rows="$work/rows.tsv"
: >"$rows"
# row MODE RANKS SCHEDULE SPLIT JSON_FILE|'' REASON
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$rows"; }

# run_row MODE LAUNCH(threads|mpirun) RANKS COMPUTE MODEL BLOCKS SCHEDULE
run_row() {
  local mode="$1" launch="$2" ranks="$3" compute="$4" model_file="$5" blocks="$6" schedule="$7"
  local vpp=1
  [[ "$schedule" == interleaved ]] && vpp=2
  local sp
  sp="$(split "$blocks" $((ranks * vpp)))"
  local out="$work/run-$launch-$ranks-$compute-$schedule.json" err="$work/run-$launch-$ranks-$compute-$schedule.err"
  local args=(run --model "$model_file" --cluster ideal --pp "$ranks" --vpp "$vpp" --microbatches $((2 * ranks))
              --schedule "$schedule" --split "$sp" --compute "$compute" --profile "$work/profile.json"
              --iterations "$iterations" --warmup "$warmup" --json)
  echo "fidelity.sh: $mode, $ranks ranks, $schedule, split $sp" >&2
  local status=0
  if [[ "$launch" == mpirun ]]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 600 \
      mpirun -np "$ranks" --oversubscribe "$pw" "${args[@]}" >"$out" 2>"$err" || status=$?
  elif [[ "$launch" == torchrun ]]; then
    # The variables torchrun gives its workers, set by hand (no torchrun here); process 0 prints the report
    # and listens at MASTER_PORT + 1.
    local port pids=() k
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1] - 1)')"
    for ((k = 0; k < ranks; k++)); do
      WORLD_SIZE="$ranks" RANK="$k" LOCAL_RANK="$k" LOCAL_WORLD_SIZE="$ranks" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
        timeout 600 "$pw" "${args[@]}" >"$out.$k" 2>"$err.$k" &
      pids+=($!)
    done
    for ((k = 0; k < ranks; k++)); do wait "${pids[$k]}" || status=$?; done
    mv "$out.0" "$out"
    cat "$err".* >"$err"
    rm -f "$out".* "$err".*
  else
    "$pw" "${args[@]}" >"$out" 2>"$err" || status=$?
  fi
  if [[ $status -ne 0 ]] || ! python3 -c "import json,sys; json.load(open(sys.argv[1]))['measured_step_time_s']" "$out" 2>/dev/null; then
    row "$mode" "$ranks" "$schedule" "$sp" "" "unavailable: $(head -c 300 "$err" | tr '\t\n' '  ')(exit $status)"
  else
    row "$mode" "$ranks" "$schedule" "$sp" "$out" ""
  fi
}

schedules=(gpipe 1f1b interleaved zb-h1)
for s in "${schedules[@]}"; do run_row "threads, real compute" threads 2 real "$model" 8 "$s"; done
for ranks in 4 8; do
  for s in "${schedules[@]}"; do run_row "threads, sleep compute" threads "$ranks" sleep "$deep" 32 "$s"; done
done
if command -v mpirun >/dev/null; then
  for s in "${schedules[@]}"; do run_row "mpirun processes, real compute" mpirun 2 real "$model" 8 "$s"; done
else
  for s in "${schedules[@]}"; do
    stages=2
    [[ "$s" == interleaved ]] && stages=4
    row "mpirun processes, real compute" 2 "$s" "$(split 8 $stages)" "" "unavailable: no mpirun on PATH"
  done
fi
for s in "${schedules[@]}"; do run_row "torchrun processes (TCP), real compute" torchrun 2 real "$model" 8 "$s"; done

python3 - "$rows" "$work/profile.json" "$iterations" "$warmup" <<'EOF'
import json, sys
rows, profile, iterations, warmup = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
m = profile["machine"]
print(f"{profile['tool']} on {m['device']} ({m['cores']} cores); {iterations} measured iterations after {warmup} warm-up per row")
print()
print("| mode | ranks | schedule | split | predicted | measured | error % | spread % | act. peak predicted | act. peak measured | act. error % |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
notes = []
for line in open(rows):
    mode, ranks, schedule, split, path, reason = line.rstrip("\n").split("\t")
    if not path:
        print(f"| {mode} | {ranks} | {schedule} | {split} | - | - | - | - | - | - | - |")
        notes.append(f"{mode}, {schedule}: {reason.strip()}")
        continue
    j = json.load(open(path))
    p, t = j["predicted_step_time_s"], j["measured_step_time_s"]
    # Activation peaks per rank (MB), and the rank furthest off.
    pred = [r["predicted_activation_peak_bytes"] for r in j["ranks"]]
    meas = [r["activation_peak_bytes"] for r in j["ranks"]]
    errs = [(a - b) / b * 100 if b > 0 else 0.0 for a, b in zip(pred, meas)]
    worst = max(errs, key=abs)
    mb = lambda v: ", ".join(f"{x / 1e6:.2f}" for x in v) + " MB"
    print(f"| {mode} | {ranks} | {schedule} | {split} | {p * 1e3:.2f} ms | {t * 1e3:.2f} ms | {j['error_pct']:+.1f} | {j['spread_pct']:.1f} | {mb(pred)} | {mb(meas)} | {worst:+.1f} |")
for n in notes:
    print(f"\n{n}")
EOF
