#!/usr/bin/env bash
# serve plan drops configurations that cannot rank among its --top plans (planner/serving_leaders.hpp): this runs
# workloads across engines, shapes, arrivals, SLOs and models twice, at --top 5 and at --top 1000 (where nothing
# can be dropped), and fails when the five plans printed differ (docs/benchmarks.md, "serve plan drops what cannot
# rank"). About a minute on 2 cores.
#
#   bench/serve_plan_drops.sh [BUILD_DIR]     (default build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pw=${1:-$root/build}/cli/pipewright
cases=0 differing=0
while read -r line; do
  [ -z "$line" ] && continue
  cases=$((cases + 1))
  # shellcheck disable=SC2086  # each line is a list of options
  top=$("$pw" serve plan $line | sed -n '5,9p')
  # shellcheck disable=SC2086
  all=$("$pw" serve plan $line --top 1000 | sed -n '5,9p')
  if [ "$top" != "$all" ]; then
    differing=$((differing + 1))
    printf 'differs: %s\n--top 5:\n%s\n--top 1000:\n%s\n' "$line" "$top" "$all"
  fi
done <<'CASES'
--model llama3-8b --cluster dgx-h100 --gpus 64 --requests 300 --prompt-tokens uniform:64:4096 --output-tokens uniform:8:1024
--model llama3-8b --cluster dgx-h100 --gpus 64 --requests 300 --prompt-tokens uniform:64:4096 --output-tokens uniform:8:1024 --disaggregate
--model llama3-8b --cluster dgx-h100 --gpus 64 --requests 300 --rate 50 --output-tokens uniform:1:300 --disaggregate
--model llama3-8b --cluster dgx-h100 --gpus 32 --requests 300 --concurrency 64 --output-tokens uniform:1:300
--model llama3-8b --cluster dgx-a100-80gb --gpus 48 --requests 300 --engine sglang --output-tokens uniform:2:600 --disaggregate
--model llama3-8b --cluster dgx-h100 --gpus 48 --requests 300 --engine trtllm --output-tokens uniform:2:600 --tpot-slo 3ms
--model llama3-70b --cluster dgx-h100 --gpus 64 --requests 200 --enforce-eager --output-tokens uniform:2:400 --disaggregate
--model llama3-70b --cluster dgx-h100 --gpus 64 --requests 200 --kv-cache-dtype fp8 --quantization fp8 --prompt-tokens 8000 --output-tokens uniform:2:400
--model llama3-70b --cluster dgx-h100 --gpus 64 --requests 200 --no-chunked-prefill --prompt-tokens uniform:100:6000 --ttft-slo 500ms --tpot-slo 20ms --disaggregate
--model llama3-70b --cluster dgx-h100 --gpus 64 --requests 200 --rate 20 --ttft-slo 300ms --tpot-slo 12ms --slo-percentile 90
--model mixtral-8x7b --cluster dgx-h100 --gpus 32 --requests 300 --output-tokens uniform:2:500 --disaggregate
--model qwen3-30b-a3b --cluster dgx-h100 --gpus 32 --requests 300 --output-tokens uniform:2:500 --tpot-slo 4ms
--model llama3-8b --cluster dgx-h100 --gpus 16 --requests 500 --max-num-seqs 16 --output-tokens uniform:2:300 --tpot-slo 2ms --ttft-slo 1s
--model llama2-13b --cluster dgx-a100-80gb --gpus 64 --requests 400 --output-tokens normal:200:100 --prompt-tokens normal:1000:500 --disaggregate --tpot-slo 15ms
--model llama3-8b --cluster dgx-h100 --gpus 1000 --disaggregate --prompt-tokens uniform:128:2048 --output-tokens uniform:16:512 --requests 1000 --ttft-slo 80ms --tpot-slo 2ms
--model llama3-8b --cluster dgx-h100 --gpus 1000 --disaggregate --prompt-tokens uniform:128:2048 --output-tokens uniform:16:512 --requests 1000 --tpot-slo 1.3ms --slo-percentile 50
CASES
echo "serve plan drops: $cases workloads, $differing with other plans at --top 5 than at --top 1000"
[ "$differing" -eq 0 ]
