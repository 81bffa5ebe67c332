#!/usr/bin/env bash
# Predicted vs measured step time and activation peak (per rank) on this machine: profiles the tiny Llama-style
# model, then runs gpipe, 1f1b, interleaved and zb-h1 with uneven splits through `pipewright run --json` (2 ranks
# with real compute; 4 and 8 ranks with sleep compute; 8 with real compute, more ranks than this machine's cores
# where it has fewer than 8; 2 processes under mpirun, and 2 under torchrun's variables
# joined over TCP), then the tiny MoE example as 2 data-parallel replicas with its experts over both (ep 2:
# threads, mpirun, torchrun), and prints one markdown table. Builds nothing.
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
# The sleep rows reach 8 ranks x 2 chunks: the same model, deeper, profiled on its own (its layers have the
# tiny model's shapes, but a profile times them in passes over the model's blocks, and 32 blocks leave less
# of each in the caches than 8).
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
echo "fidelity.sh: profiling $(basename "$deep") on this machine ..." >&2
"$pw" profile --backend cpu --model "$deep" --micro-batch-size 1 --out "$work/deep-profile.json" >"$work/deep-profile.txt"
moe_model="$root/examples/tiny-moe.json"
echo "fidelity.sh: profiling $(basename "$moe_model") on this machine ..." >&2
"$pw" profile --backend cpu --model "$moe_model" --micro-batch-size 2 --out "$work/moe-profile.json" >"$work/moe-profile.txt"

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

# launch LAUNCH(threads|mpirun|torchrun) PROCESSES OUT ERR ARGS...: one `pipewright run`, as threads or as
# PROCESSES processes; sets `status`.
launch() {
  local how="$1" processes="$2" out="$3" err="$4"
  shift 4
  status=0
  if [[ "$how" == mpirun ]]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 600 \
      mpirun -np "$processes" --oversubscribe "$pw" "$@" >"$out" 2>"$err" || status=$?
  elif [[ "$how" == torchrun ]]; then
    # The variables torchrun gives its workers, set by hand (no torchrun here), its run id included (what
    # tells this job's processes from another's); process 0 prints the report and listens at MASTER_PORT + 1.
    local port pids=() k
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1] - 1)')"
    for ((k = 0; k < processes; k++)); do
      WORLD_SIZE="$processes" RANK="$k" LOCAL_RANK="$k" LOCAL_WORLD_SIZE="$processes" MASTER_ADDR=127.0.0.1 \
        MASTER_PORT="$port" TORCHELASTIC_RUN_ID="fidelity-$$-$port" timeout 600 "$pw" "$@" >"$out.$k" 2>"$err.$k" &
      pids+=($!)
    done
    for ((k = 0; k < processes; k++)); do wait "${pids[$k]}" || status=$?; done
    mv "$out.0" "$out"
    cat "$err".* >"$err"
    rm -f "$out".* "$err".*
  else
    "$pw" "$@" >"$out" 2>"$err" || status=$?
  fi
}

# record MODE RANKS SCHEDULE SPLIT OUT ERR: the row of a finished run.
record() {
  if [[ $status -ne 0 ]] || ! python3 -c "import json,sys; json.load(open(sys.argv[1]))['measured_step_time_s']" "$5" 2>/dev/null; then
    row "$1" "$2" "$3" "$4" "" "unavailable: $(head -c 300 "$6" | tr '\t\n' '  ')(exit $status)"
  else
    row "$1" "$2" "$3" "$4" "$5" ""
  fi
}

# run_row MODE LAUNCH(threads|mpirun|torchrun) RANKS COMPUTE MODEL BLOCKS SCHEDULE
run_row() {
  local mode="$1" how="$2" ranks="$3" compute="$4" model_file="$5" blocks="$6" schedule="$7"
  local vpp=1
  [[ "$schedule" == interleaved ]] && vpp=2
  local sp
  sp="$(split "$blocks" $((ranks * vpp)))"
  local out="$work/run-$how-$ranks-$compute-$schedule.json" err="$work/run-$how-$ranks-$compute-$schedule.err"
  local profile="$work/profile.json"
  [[ "$model_file" == "$deep" ]] && profile="$work/deep-profile.json"
  echo "fidelity.sh: $mode, $ranks ranks, $schedule, split $sp" >&2
  launch "$how" "$ranks" "$out" "$err" run --model "$model_file" --cluster ideal --pp "$ranks" --vpp "$vpp" \
    --microbatches $((2 * ranks)) --schedule "$schedule" --split "$sp" --compute "$compute" \
    --profile "$profile" --iterations "$iterations" --warmup "$warmup" --json
  record "$mode" "$ranks" "$schedule" "$sp" "$out" "$err"
}

# moe_row MODE LAUNCH: the tiny MoE example on 2 data-parallel replicas of one stage, its experts over both
# (ep 2): every MoE block's dispatch and combine cross between the replicas.
moe_row() {
  local mode="$1" how="$2"
  local out="$work/run-$how-moe.json" err="$work/run-$how-moe.err"
  echo "fidelity.sh: $mode" >&2
  launch "$how" 2 "$out" "$err" run --model "$moe_model" --cluster ideal --pp 1 --dp 2 --ep 2 --microbatches 8 \
    --micro-batch-size 2 --profile "$work/moe-profile.json" --iterations "$iterations" --warmup "$warmup" --json
  record "$mode" "1 x dp 2" 1f1b "4" "$out" "$err"
}

schedules=(gpipe 1f1b interleaved zb-h1)
for s in "${schedules[@]}"; do run_row "threads, real compute" threads 2 real "$model" 8 "$s"; done
for ranks in 4 8; do
  for s in "${schedules[@]}"; do run_row "threads, sleep compute" threads "$ranks" sleep "$deep" 32 "$s"; done
done
# 8 rank threads of real compute: on a machine of fewer cores they take turns on them (executor/core_turns.hpp;
# the prediction's shared cores with the profile's hand-over and wake-up).
for s in "${schedules[@]}"; do run_row "threads, real compute, 8 ranks on $(nproc) cores" threads 8 real "$deep" 32 "$s"; done
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
moe_row "threads, real compute, tiny-moe ep 2" threads
if command -v mpirun >/dev/null; then
  moe_row "mpirun processes, real compute, tiny-moe ep 2" mpirun
else
  row "mpirun processes, real compute, tiny-moe ep 2" "1 x dp 2" 1f1b 4 "" "unavailable: no mpirun on PATH"
fi
moe_row "torchrun processes (TCP), real compute, tiny-moe ep 2" torchrun

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
