#!/usr/bin/env bash
# The CUDA backend on a machine with NVIDIA GPUs, in one go (about 3 minutes with the build on 16 cores):
#   1. builds pipewright and test_cuda with CUDA and NCCL (-DPIPEWRIGHT_CUDA=ON), against the Debian packages
#      carried in .gpu-deps/ when they are there (scripts/gpu-deps.sh);
#   2. the numerical check of the GPU layers against the CPU backend (bf16 within 2e-2, fp32 within 1e-4;
#      forward and all gradients) and the other GPU tests (test_cuda "[gpu]");
#   3. profiles examples/tiny-llama.json on the GPU, then the links (--links: NCCL between GPU pairs, or a
#      device-to-device copy on one GPU), the collectives and the GEMM slowdown beside NCCL traffic;
#   3b. times llama3-8b's GEMM shapes (4,096 tokens; bf16, cuBLASLt) into kernel tables (profile --kernels-out)
#      and compares them with AIConfigurator's published table of the same GPU carried in .gpu-deps/kernels/
#      (kernels compare: the published time read at each shape over ours, the median and the 10-90% range);
#   4. runs a 4-stage plan with 1f1b and zb-h1 on whatever GPUs are here (on one GPU through the local
#      transport) and prints the predicted-vs-measured table;
#   5. with 2 GPUs or more and MPI built: the 4-stage plan as 2 processes under mpirun (NCCL between them;
#      with 4 GPUs pp 4, two rank threads per process, else pp 2 with 2 chunks per rank, one rank each).
# Usage: scripts/gpu-check.sh [--no-build] [BUILD_DIR]   (default: build-gpu in the repository; --no-build runs
# BUILD_DIR's cli/pipewright and tests/test_cuda as they are, built earlier or elsewhere). Everything it writes goes
# to BUILD_DIR/gpu-check/. Exit status: 0 when every step passed, 1 otherwise (the summary names the steps).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_it=1
if [ "${1:-}" = "--no-build" ]; then
  build_it=0
  shift
fi
build=${1:-$root/build-gpu}
out=$build/gpu-check
model=$root/examples/tiny-llama.json
jobs=$(nproc 2>/dev/null || echo 4)
failed=()

step() { printf '\n== %s  [%d s]\n' "$1" "$SECONDS"; }
# run NAME SECONDS COMMAND...: runs it under a time limit, output to the terminal and to $out/NAME.log.
run() {
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
  local status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ]; then
    [ "$status" -eq 124 ] && echo "gpu-check: $name ran past $limit s"
    failed+=("$name (exit $status)")
  fi
  return "$status"
}

mkdir -p "$out"
step "GPUs"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
else
  echo "gpu-check: nvidia-smi is not here; the GPU tests will say whether CUDA sees a GPU"
  gpus=1
  gpu_name=unknown
fi
case "$gpu_name" in
  *H200*) cluster=hgx-h200 ;;
  *A100*40GB*) cluster=dgx-a100-40gb ;;
  *A100*) cluster=dgx-a100-80gb ;;
  *) cluster=dgx-h100 ;;
esac

step "toolchain"
uname -m
sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null
"${CXX:-c++}" --version 2>&1 | head -1
cmake --version | head -1
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc_path" --version 2>&1 | tail -1
# configure_and_build: configures BUILD_DIR for CUDA and builds pipewright and test_cuda (exit 1 on failure).
configure_and_build() {
  local configure=(-DCMAKE_BUILD_TYPE=Release -DPIPEWRIGHT_CUDA=ON -DPIPEWRIGHT_BUILD_BENCH=OFF)
  # Where .gpu-deps/ holds the Debian packages (scripts/gpu-deps.sh download, here), the build uses them
  # alone, unpacked into the build folder: a GPU machine may lack them or hold other versions (Catch2 3, not 2).
  if compgen -G "$root/.gpu-deps/*.deb" > /dev/null; then
    local carried carried_args
    if ! carried=$("$root/scripts/gpu-deps.sh" unpack "$build/deps"); then
      echo "gpu-check: the carried packages could not be unpacked"
      exit 1
    fi
    read -r -a carried_args <<< "$carried"
    rm -f "$build/CMakeCache.txt"  # packages found elsewhere on an earlier run stay cached otherwise
    configure+=("${carried_args[@]}")
  fi
  # NCCL outside the toolkit: the nvidia-nccl wheel that PyTorch brings (include/ and lib/libnccl.so.2).
  if [ ! -f /usr/local/cuda/include/nccl.h ] && command -v python3 > /dev/null; then
    local nccl_root
    nccl_root=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
    if [ -n "$nccl_root" ] && [ -f "$nccl_root/include/nccl.h" ]; then
      echo "NCCL from $nccl_root"
      configure+=("-DNCCL_ROOT=$nccl_root")
    fi
  fi
  step "configure and build ($jobs jobs)"
  if ! cmake -S "$root" -B "$build" "${configure[@]}" > "$out/configure.log" 2>&1; then
    tail -30 "$out/configure.log"
    echo "gpu-check: configure failed (CUDA 13 nvcc and NCCL needed; see $out/configure.log)"
    exit 1
  fi
  grep "pipewright: CUDA parts" "$out/configure.log"
  if ! timeout 300 cmake --build "$build" -j "$jobs" --target pipewright test_cuda > "$out/build.log" 2>&1; then
    grep -E "error|Error" "$out/build.log" | head -30
    echo "gpu-check: build failed (see $out/build.log)"
    exit 1
  fi
  echo "built in $SECONDS s"
}

if [ "$build_it" -eq 1 ]; then
  configure_and_build
else
  for binary in cli/pipewright tests/test_cuda; do
    [ -x "$build/$binary" ] || { echo "gpu-check: --no-build: $build/$binary is not there; build it or drop --no-build"; exit 2; }
  done
  echo "gpu-check: --no-build: $build's pipewright and test_cuda as they are"
fi
pw=$build/cli/pipewright

step "numerical check and GPU tests (test_cuda \"[gpu]\")"
run gpu-tests 150 "$build/tests/test_cuda" "[gpu],[mpi]"

step "profile tiny-llama on the GPU (bf16)"
run profile 90 "$pw" profile --backend cuda --model "$model" --micro-batch-size 1 2 --min-time 0.1 \
  --out "$out/profile.json"

step "profile the links, collectives and GEMM overlap"
links=("$pw" profile --backend cuda --model "$model" --min-time 0.02 --links --link-repetitions 5
  --out "$out/profile-links.json")
[ "$gpus" -ge 2 ] && links+=(--cluster-out "$out/cluster.json")
run links 120 "${links[@]}"

step "GEMM sweep of llama3-8b's shapes against the published table"
rm -rf "$out/kernels"  # a new folder each check: --kernels-out never writes over one
if run kernels 180 "$pw" profile --backend cuda --model llama3-8b --seq-len 4096 --min-time 1 \
  --kernels-out "$out/kernels"; then
  chip=$(sed -n 's/^ *"system": "\(.*\)",$/\1/p' "$out/kernels/manifest.json" | head -1)
  published=$root/.gpu-deps/kernels/${chip}_sxm-vllm
  if [ -d "$published" ]; then
    run kernels-compare 60 "$pw" kernels compare "$out/kernels" "$published"
  else
    echo "gpu-check: no published table of '$chip' carried (scripts/gpu-deps.sh download has H100, H200, B200)"
  fi
fi

step "4-stage plan, 1f1b and zb-h1, predicted (from the profile) vs measured"
declare -A predicted measured error
for schedule in 1f1b zb-h1; do
  if run "run-$schedule" 90 "$pw" run --backend cuda --model "$model" --cluster "$cluster" --pp 4 --microbatches 8 \
    --micro-batch-size 2 --schedule "$schedule" --profile "$out/profile.json" --iterations 5 --warmup 2 \
    --json; then
    field() { sed -n "s/^ *\"$1\": \([-0-9.eE+]*\),\{0,1\}$/\1/p" "$out/run-$schedule.log" | head -1; }
    predicted[$schedule]=$(field predicted_step_time_s)
    measured[$schedule]=$(field measured_step_time_s)
    error[$schedule]=$(field error_pct)
  fi
done

step "4-stage plan as 2 processes under mpirun"
if [ "$gpus" -lt 2 ]; then
  echo "gpu-check: skipped: 2 processes need 2 GPUs (NCCL wants a GPU per rank), $gpus here"
elif ! grep -qs "pipewright: MPI parts ON" "$out/configure.log" || ! command -v mpirun > /dev/null; then
  echo "gpu-check: skipped: this build has no MPI or mpirun is missing (install libopenmpi-dev and openmpi-bin)"
else
  if [ "$gpus" -ge 4 ]; then split=(--pp 4); else split=(--pp 2 --vpp 2); fi
  if [ "$gpus" -ge 4 ]; then sched=1f1b; else sched=interleaved; fi
  # As root OpenMPI wants both variables; --oversubscribe lets 2 processes start on a host with fewer slots.
  run mpirun-2 60 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 \
    "$pw" run --backend cuda --model "$model" --cluster "$cluster" "${split[@]}" --schedule "$sched" \
    --microbatches 8 --micro-batch-size 2 --profile "$out/profile.json" --iterations 5 --warmup 2
fi

step "summary"
printf '%s\n' "tiny-llama, pp 4, 8 micro-batches of 2 x 32 tokens, bf16, $gpus GPU(s): $gpu_name"
printf '%-8s %16s %16s %10s\n' schedule "predicted (ms)" "measured (ms)" error
for schedule in 1f1b zb-h1; do
  if [ -n "${measured[$schedule]:-}" ]; then
    awk -v s="$schedule" -v p="${predicted[$schedule]}" -v m="${measured[$schedule]}" -v e="${error[$schedule]}" \
      'BEGIN { printf "%-8s %16.3f %16.3f %+9.1f%%\n", s, p * 1000, m * 1000, e }'
  else
    printf '%-8s %16s %16s %10s\n' "$schedule" - "failed" -
  fi
done
grep -h "numerical check (" "$out/gpu-tests.log" 2>/dev/null
grep -h "B read at A's shapes" "$out/kernels-compare.log" 2>/dev/null | sed 's/^ */published over ours: /' 
echo "logs and profiles: $out  [$SECONDS s in all]"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'gpu-check: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "gpu-check: all steps passed"
