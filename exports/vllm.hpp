#pragma once
// A serving plan as the `vllm serve` command that runs it, flag names as vLLM's EngineArgs defines them
// (vllm/engine/arg_utils.py, checked at vLLM 99d7eb5d; each dataclass field is the flag of its name): the tp and
// pp of one engine, the replicas as data parallelism, the scheduler's limits, chunked prefill, the share of GPU
// memory and the KV cache's type. An engine wider than a node runs its ranks through Ray, which vLLM requires
// for one engine across nodes; the command says so. Replicas over several nodes are vLLM's data parallelism
// over nodes (--data-parallel-size-local, --data-parallel-start-rank, --headless on all but node 0); replicas
// of an MoE model, whose data-parallel ranks vLLM steps together, and replicas wider than a node are servers
// of their own behind vllm-router dealing requests in turn, as simulated. Data-parallel attention plans are
// refused: vLLM balances requests over its engines by their queues, not in turn as the simulation deals them.
#include <string>

#include "planner/serving_plan.hpp"

namespace pw {

// `model`: what vLLM loads (a Hugging Face id or a folder); `gpus_per_node`: the cluster's; `routed_experts`:
// whether the model is a mixture of experts.
std::string vllm_serve_command(const ServingPlan& plan, const ServingConfig& engine, const std::string& model,
                               int gpus_per_node, bool routed_experts);

// The flags after the parallel degrees, each on a continued line: the scheduler's limits, chunked prefill, the
// share of GPU memory, the weights' and the KV cache's types, the attention backend the plan priced
// (--attention-backend, EngineArgs.attention_backend in vLLM 0.33.0) and --enforce-eager where the engine ran
// eager (shared with the disaggregated export).
std::string vllm_engine_limit_flags(const ServingConfig& engine);

}  // namespace pw
