#pragma once
// A serving plan as the SGLang launch commands that run it, flag names as SGLang's ServerArgs defines them
// (python/sglang/srt/server_args.py, checked at sgl-project/sglang 001067ff: each dataclass field is the flag
// of its name, tp_size -> --tp-size): the tp and pp of one engine, the replicas as --dp-size, the scheduler's
// limits (--max-running-requests, --chunked-prefill-size: SGLang counts the decodes mixed into a chunked
// batch against it, as vLLM counts them against --max-num-batched-tokens), --enable-mixed-chunk (without it
// SGLang runs prefill and decode batches apart, which is not what was simulated), the share of GPU memory
// for weights and the KV cache, and the KV cache's type. Spanning nodes: one command per node, --nnodes,
// --node-rank and --dist-init-addr. Data-parallel attention (serving/dp_attention_serving.hpp): --enable-dp-attention
// with --dp-size engines in a --tp-size of all the GPUs, --ep-size over them, --moe-a2a-backend deepep,
// --load-balance-method round_robin, and the per-engine limits multiplied by --dp-size, which SGLang divides
// them by (server_args.py _handle_data_parallelism, model_runner's _resolve_max_num_reqs).
#include <string>

#include "planner/server_placement.hpp"
#include "planner/serving_plan.hpp"

namespace pw {

// `model`: what SGLang loads (a Hugging Face id or a folder); `gpus_per_node`: the cluster's.
std::string sglang_launch_commands(const ServingPlan& plan, const ServingConfig& engine, const std::string& model,
                                   int gpus_per_node);

// What one server does: both phases, or one pool's of a disaggregated plan (--disaggregation-mode).
enum class ServerRole { Both, Prefill, Decode };

// The flags of one server of tp x pp (and `replicas` as --dp-size), each on a continued line. A prefill server
// leaves out --enable-mixed-chunk (it has no decodes to mix), a decode server the prefill limits too.
std::string sglang_engine_flags(int tp, int pp, int replicas, const ServingConfig& engine, ServerRole role);

// The flags of one server of `dp` data-parallel attention engines of tp GPUs (the experts over all of them), each on
// a continued line, its limits per engine as `role` has them.
std::string sglang_dp_attention_flags(int tp, int dp, const ServingConfig& engine, ServerRole role);

// One server of several (planner/server_placement.hpp): `launch` under a comment naming `label` and its GPUs, or,
// for a server of whole nodes, once per node with --nnodes, --node-rank and --dist-init-addr on its first node.
std::string sglang_server_commands(const std::string& label, const ServerPlace& place, const std::string& launch);

}  // namespace pw
