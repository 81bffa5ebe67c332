#include "exports/sglang.hpp"

#include <fmt/format.h>

#include <vector>

namespace pw {

namespace {

// The scheduler's limits and memory flags. With data-parallel attention SGLang divides --max-running-requests
// (model_runner's _resolve_max_num_reqs) and --chunked-prefill-size (server_args' _handle_data_parallelism)
// by --dp-size, so each of the `dp` engines gets the simulated limits when they are multiplied by it.
std::string limit_flags(const ServingConfig& engine, ServerRole role, int dp) {
  std::string flags = fmt::format(" \\\n  --max-running-requests {}", dp * engine.max_num_seqs);
  if (role != ServerRole::Decode) {
    // Without chunking a prompt is prefilled whole: -1 turns chunking off, and the prefill batch's cap is the
    // token budget.
    flags += engine.chunked_prefill ? fmt::format(" \\\n  --chunked-prefill-size {}", dp * engine.max_num_batched_tokens)
                                    : std::string(" \\\n  --chunked-prefill-size -1");
    flags += fmt::format(" \\\n  --max-prefill-tokens {}", engine.max_num_batched_tokens);
  }
  // Prefills beside the decodes, as simulated, unless the engine was simulated prefill-first (its default).
  if (role == ServerRole::Both && !engine.prefill_first) flags += " \\\n  --enable-mixed-chunk";
  flags += fmt::format(" \\\n  --mem-fraction-static {:g}", engine.gpu_memory_utilization);
  if (engine.weights == ServingWeights::Fp8) flags += " \\\n  --quantization fp8";
  flags += fmt::format(" \\\n  --kv-cache-dtype {}", engine.kv_dtype == KvCacheDtype::Fp8 ? "fp8_e4m3" : "auto");
  if (!engine.attention_backend.empty()) flags += fmt::format(" \\\n  --attention-backend {}", engine.attention_backend);
  // Without CUDA graphs for either phase (sglang 0.5.23: --disable-cuda-graph is deprecated for these).
  if (engine.eager) flags += " \\\n  --cuda-graph-backend-decode disabled \\\n  --cuda-graph-backend-prefill disabled";
  // SGLang runs both drafts as EAGLE (a model's MTP module is its built-in EAGLE head): K steps of one token each
  // (top-k 1), K + 1 tokens verified.
  if (engine.speculative_tokens > 0) {
    flags += fmt::format(" \\\n  --speculative-algorithm EAGLE \\\n  --speculative-num-steps {} \\\n  "
                         "--speculative-eagle-topk 1 \\\n  --speculative-num-draft-tokens {}",
                         engine.speculative_tokens, engine.speculative_tokens + 1);
    if (engine.speculative_method == "eagle") flags += " \\\n  --speculative-draft-model-path \"$DRAFT_MODEL\"";
  }
  return flags;
}

// Servers of `gpus_each` GPUs, each with `flags`, and SGLang's router dealing the requests to them in turn
// (python -m sglang_router.launch_router --worker-urls ... --policy round_robin, docs/advanced_features/router.md),
// as the simulation deals them: data-parallel attention groups, or replicas over several nodes (SGLang's own
// --dp-size would spread one tp group over the nodes).
// `label`: each server's name in its comment ("group", "replica"); `count_fix`: the remedy past kMaxServers.
std::string servers_behind_router(const ServerSet& set, const std::string& label, const std::string& count_fix,
                                  const std::string& heading, const std::string& flags, const std::string& model,
                                  int gpus_per_node) {
  constexpr int kFirstPort = 30000;
  check_server_count(set.count, count_fix);
  const std::vector<ServerPlace> places = place_servers(set, gpus_per_node);
  std::string out = heading + nodes_text(places.back().node + places.back().nodes, gpus_per_node);
  std::string router = "python -m sglang_router.launch_router \\\n  --worker-urls";
  for (size_t g = 0; g < places.size(); ++g) {
    const ServerPlace& p = places[g];
    const int port = kFirstPort + static_cast<int>(g);
    const std::string launch = fmt::format("python -m sglang.launch_server --model-path {}{} \\\n  --host 0.0.0.0 \\\n  "
                                           "--port {} \\\n  --base-gpu-id {}",
                                           model, flags, port, p.local_gpu);
    out += sglang_server_commands(fmt::format("{} {}", label, g), p, launch);
    router += fmt::format(" \\\n    \"http://$NODE{}:{}\"", p.node, port);
  }
  out += "# the router, on any host that reaches the servers: each request to the next server in turn, as simulated;\n"
         "# clients send to its port 8000\n";
  return out + router + " \\\n  --policy round_robin \\\n  --host 0.0.0.0 \\\n  --port 8000\n";
}

}  // namespace

// Data-parallel attention: --tp-size counts every GPU of the group, --dp-size the attention engines; the
// experts over all of them (--ep-size), exchanged by DeepEP's all-to-all, and the requests dealt in turn.
std::string sglang_dp_attention_flags(int tp, int dp, const ServingConfig& engine, ServerRole role) {
  return fmt::format(" \\\n  --tp-size {} \\\n  --pp-size 1 \\\n  --dp-size {} \\\n  --enable-dp-attention \\\n  "
                     "--ep-size {} \\\n  --moe-a2a-backend deepep \\\n  --load-balance-method round_robin",
                     dp * tp, dp, dp * tp) +
         limit_flags(engine, role, dp) + (engine.two_batch_overlap ? " \\\n  --enable-two-batch-overlap" : "") +
         (engine.redundant_experts > 0 ? fmt::format(" \\\n  --ep-num-redundant-experts {}", engine.redundant_experts)
                                       : std::string());
}

std::string sglang_server_commands(const std::string& label, const ServerPlace& place, const std::string& launch) {
  if (place.nodes == 1) return fmt::format("# {}: {}\n{}\n", label, gpus_text(place), launch);
  std::string out;
  for (int r = 0; r < place.nodes; ++r)
    out += fmt::format("# {}: node {} of its {} (node rank {})\n{} \\\n  --nnodes {} \\\n  --node-rank {} \\\n  "
                       "--dist-init-addr \"$NODE{}:5000\"\n",
                       label, place.node + r, place.nodes, r, launch, place.nodes, r, place.node);
  return out;
}

std::string sglang_engine_flags(int tp, int pp, int replicas, const ServingConfig& engine, ServerRole role) {
  std::string flags = fmt::format(" \\\n  --tp-size {} \\\n  --pp-size {}", tp, pp);
  if (replicas > 1) flags += fmt::format(" \\\n  --dp-size {}", replicas);
  return flags + limit_flags(engine, role, 1);
}

std::string sglang_launch_commands(const ServingPlan& plan, const ServingConfig& engine, const std::string& model,
                                   int gpus_per_node) {
  if (plan.dp_attention > 1 && plan.replicas > 1)
    return servers_behind_router(
        {"data-parallel attention group", fmt::format("{} engines of tp {}", plan.dp_attention, plan.tp),
         "plan groups that fit in a node or fill whole nodes", 0, plan.dp_attention * plan.tp, plan.replicas},
        "group", "plan wider groups (a larger --dp-attention)",
        fmt::format("# {} groups of {} data-parallel attention engines of tp {} (ep {}), a server each\n", plan.replicas,
                    plan.dp_attention, plan.tp, plan.ep()),
        sglang_dp_attention_flags(plan.tp, plan.dp_attention, engine, ServerRole::Both), model, gpus_per_node);
  const int gpus = plan.tp * plan.pp * plan.replicas * plan.dp_attention;
  const int nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
  // Replicas over several nodes: a server each, so that every tp group stays on its GPUs.
  if (plan.dp_attention == 1 && plan.replicas > 1 && nodes > 1)
    return servers_behind_router({"replica", fmt::format("tp {} x pp {}", plan.tp, plan.pp),
                                  "plan engines that fit in a node or fill whole nodes", 0, plan.tp * plan.pp, plan.replicas},
                                 "replica", "plan fewer, wider engines (--gpus)",
                                 fmt::format("# {} replicas of tp {} x pp {}, a server each\n", plan.replicas, plan.tp, plan.pp),
                                 sglang_engine_flags(plan.tp, plan.pp, 1, engine, ServerRole::Both), model, gpus_per_node);
  const std::string flags = plan.dp_attention > 1 ? sglang_dp_attention_flags(plan.tp, plan.dp_attention, engine, ServerRole::Both)
                                                  : sglang_engine_flags(plan.tp, plan.pp, plan.replicas, engine, ServerRole::Both);
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
