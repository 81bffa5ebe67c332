#include "exports/vllm.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

std::string vllm_engine_limit_flags(const ServingConfig& engine) {
  std::string out = fmt::format(" \\\n  --max-num-seqs {} \\\n  --max-num-batched-tokens {}", engine.max_num_seqs,
                                engine.max_num_batched_tokens);
  out += engine.chunked_prefill ? " \\\n  --enable-chunked-prefill" : " \\\n  --no-enable-chunked-prefill";
  out += fmt::format(" \\\n  --gpu-memory-utilization {:g}", engine.gpu_memory_utilization);
  if (engine.weights == ServingWeights::Fp8) out += " \\\n  --quantization fp8";
  out += fmt::format(" \\\n  --kv-cache-dtype {}", engine.kv_dtype == KvCacheDtype::Fp8 ? "fp8" : "auto");
  return out;
}

std::string vllm_serve_command(const ServingPlan& plan, const ServingConfig& engine, const std::string& model,
                               int gpus_per_node) {
  if (plan.dp_attention > 1)
    throw_bad_input("--export vllm: plan 1 runs {} data-parallel attention engines, and vLLM's API server sends each "
                    "request to the engine with the fewest waiting x 4 + running requests (DPLBAsyncMPClient, "
                    "vllm/v1/engine/core_client.py), not in turn as simulated; export sglang (--load-balance-method "
                    "round_robin)",
                    plan.dp_attention);
  std::string out;
  const bool across_nodes = plan.tp * plan.pp > gpus_per_node;
  if (across_nodes)
    out += fmt::format("# one engine spans {} GPUs, more than a node's {}: start a Ray cluster over its nodes and run\n"
                       "# this on its head node\n",
                       plan.tp * plan.pp, gpus_per_node);
  out += fmt::format("vllm serve {} \\\n  --tensor-parallel-size {} \\\n  --pipeline-parallel-size {}", model, plan.tp,
                     plan.pp);
  if (plan.replicas > 1) out += fmt::format(" \\\n  --data-parallel-size {}", plan.replicas);
  if (across_nodes) out += " \\\n  --distributed-executor-backend ray";
  return out + vllm_engine_limit_flags(engine) + "\n";
}

}  // namespace pw
