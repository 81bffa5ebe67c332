#include "planner/export_sglang.hpp"

#include <fmt/format.h>

namespace pw {

std::string sglang_engine_flags(int tp, int pp, int replicas, const ServingConfig& engine, ServerRole role) {
  std::string flags = fmt::format(" \\\n  --tp-size {} \\\n  --pp-size {}", tp, pp);
  if (replicas > 1) flags += fmt::format(" \\\n  --dp-size {}", replicas);
  flags += fmt::format(" \\\n  --max-running-requests {}", engine.max_num_seqs);
  if (role != ServerRole::Decode) {
    // Without chunking a prompt is prefilled whole: -1 turns chunking off, and the prefill batch's cap is the
    // token budget.
    flags += engine.chunked_prefill ? fmt::format(" \\\n  --chunked-prefill-size {}", engine.max_num_batched_tokens)
                                    : std::string(" \\\n  --chunked-prefill-size -1");
    flags += fmt::format(" \\\n  --max-prefill-tokens {}", engine.max_num_batched_tokens);
  }
  if (role == ServerRole::Both) flags += " \\\n  --enable-mixed-chunk";
  flags += fmt::format(" \\\n  --mem-fraction-static {:g}", engine.gpu_memory_utilization);
  if (engine.weights == ServingWeights::Fp8) flags += " \\\n  --quantization fp8";
  flags += fmt::format(" \\\n  --kv-cache-dtype {}", engine.kv_dtype == KvCacheDtype::Fp8 ? "fp8_e4m3" : "auto");
  return flags;
}

std::string sglang_launch_commands(const ServingPlan& plan, const ServingConfig& engine, const std::string& model,
                                   int gpus_per_node) {
  const int gpus = plan.tp * plan.pp * plan.replicas;
  const int nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
  const std::string flags = sglang_engine_flags(plan.tp, plan.pp, plan.replicas, engine, ServerRole::Both);
  const std::string launch = "python -m sglang.launch_server --model-path " + model;
  if (nodes <= 1) return launch + flags + "\n";
  std::string out = fmt::format(
      "# {} GPUs over {} nodes: run one command per node; HEAD is node 0's address, reachable from every node\n", gpus,
      nodes);
  for (int node = 0; node < nodes; ++node)
    out += fmt::format("# node {}\n{}{} \\\n  --nnodes {} \\\n  --node-rank {} \\\n  --dist-init-addr \"$HEAD:5000\"\n",
                       node, launch, flags, nodes, node);
  return out;
}

}  // namespace pw
