#include "exports/vllm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "planner/server_placement.hpp"

namespace pw {

std::string vllm_engine_limit_flags(const ServingConfig& engine) {
  std::string out = fmt::format(" \\\n  --max-num-seqs {} \\\n  --max-num-batched-tokens {}", engine.max_num_seqs,
                                engine.max_num_batched_tokens);
  out += engine.chunked_prefill ? " \\\n  --enable-chunked-prefill" : " \\\n  --no-enable-chunked-prefill";
  out += fmt::format(" \\\n  --gpu-memory-utilization {:g}", engine.gpu_memory_utilization);
  if (engine.weights == ServingWeights::Fp8) out += " \\\n  --quantization fp8";
  out += fmt::format(" \\\n  --kv-cache-dtype {}", engine.kv_dtype == KvCacheDtype::Fp8 ? "fp8" : "auto");
  if (!engine.attention_backend.empty()) out += fmt::format(" \\\n  --attention-backend {}", engine.attention_backend);
  if (engine.eager) out += " \\\n  --enforce-eager";
  // vLLM 0.33.0's SpeculativeConfig: method "mtp" (the model's own module) or "eagle" with the head's weights.
  if (engine.speculative_tokens > 0)
    out += fmt::format(" \\\n  --speculative-config \"{{\\\"method\\\": \\\"{}\\\", {}\\\"num_speculative_tokens\\\": {}}}\"",
                       engine.speculative_method,
                       engine.speculative_method == "eagle" ? "\\\"model\\\": \\\"$DRAFT_MODEL\\\", " : "",
                       engine.speculative_tokens);
  return out;
}

namespace {

// "0,1,2,3": a server's GPUs on its node.
std::string visible_devices(const ServerPlace& p) {
  std::string out;
  for (int g = p.local_gpu; g < p.local_gpu + p.gpus; ++g) out += fmt::format("{}{}", out.empty() ? "" : ",", g);
  return out;
}

// Each replica a server of its own on its own GPUs, and vllm-router dealing the requests to them in turn, as the
// simulation deals them: what vLLM's own data parallelism does not do for an MoE model (its ranks step together,
// idle ones running dummy batches, DPEngineCoreProc in vllm/v1/engine/core.py) or for engines wider than a node.
std::string independent_servers(const ServingPlan& plan, const ServingConfig& engine, const std::string& model,
                                int gpus_per_node, const std::string& why) {
  constexpr int kFirstPort = 20000;
  check_server_count(plan.replicas, "plan fewer, wider engines (--gpus)");
  const std::vector<ServerPlace> places =
      place_servers({"replica", fmt::format("tp {} x pp {}", plan.tp, plan.pp), "plan engines that fit in a node or fill whole nodes",
                     0, plan.tp * plan.pp, plan.replicas},
                    gpus_per_node);
  std::string out = fmt::format("# {} replicas of tp {} x pp {}, a server each: {}\n", plan.replicas, plan.tp, plan.pp, why) +
                    nodes_text(places.back().node + places.back().nodes, gpus_per_node);
  std::string router = "vllm-router \\\n  --worker-urls";
  for (size_t r = 0; r < places.size(); ++r) {
    const ServerPlace& p = places[r];
    const int port = kFirstPort + static_cast<int>(r);
    if (p.nodes > 1)
      out += fmt::format("# replica {}: {}: start a Ray cluster over them and run this on node {}\n", r, gpus_text(p), p.node);
    else
      out += fmt::format("# replica {}: {}\nCUDA_VISIBLE_DEVICES={} \\\n", r, gpus_text(p), visible_devices(p));
    out += fmt::format("vllm serve {} \\\n  --host 0.0.0.0 \\\n  --port {} \\\n  --tensor-parallel-size {} \\\n  "
                       "--pipeline-parallel-size {}",
                       model, port, plan.tp, plan.pp);
    if (p.nodes > 1) out += " \\\n  --distributed-executor-backend ray";
    out += vllm_engine_limit_flags(engine) + "\n";
    router += fmt::format(" \\\n    \"http://$NODE{}:{}\"", p.node, port);
  }
  out += "# the router (pip install vllm-router), on any host that reaches the servers: each request to the next\n"
         "# server in turn, as simulated; clients send to its port 8000\n";
  return out + router + " \\\n  --policy round_robin \\\n  --host 0.0.0.0 \\\n  --port 8000\n";
}

// vLLM's data parallelism over nodes (docs/serving/data_parallel_deployment.md): node 0 runs the API server and
// its engines, every other node its engines alone (--headless), all told the total, their own count and the
// first rank they hold.
std::string data_parallel_over_nodes(const ServingPlan& plan, const ServingConfig& engine, const std::string& model,
                                     int gpus_per_node) {
  const int engine_gpus = plan.tp * plan.pp;
  const int per_node = gpus_per_node / engine_gpus;
  const int nodes = (plan.replicas + per_node - 1) / per_node;
  const int nodes_given = (plan.replicas * engine_gpus + gpus_per_node - 1) / gpus_per_node;
  if (nodes > nodes_given)
    throw_bad_input("--export vllm: a node of {} GPUs holds {} engines of tp {} x pp {}, so {} replicas need {} nodes, "
                    "not the plan's {}; plan engines whose GPUs divide a node's",
                    gpus_per_node, per_node, plan.tp, plan.pp, plan.replicas, nodes, nodes_given);
  std::string out = fmt::format("# {} replicas of tp {} x pp {} over {} nodes, {} a node: run each command on its node; "
                                "HEAD is node 0's\n# address, reachable from every node\n",
                                plan.replicas, plan.tp, plan.pp, nodes, per_node);
  for (int n = 0; n < nodes; ++n) {
    const int local = std::min(per_node, plan.replicas - n * per_node);
    out += fmt::format("# node {}\nvllm serve {}{} \\\n  --tensor-parallel-size {} \\\n  --pipeline-parallel-size {} \\\n  "
                       "--data-parallel-size {} \\\n  --data-parallel-size-local {}",
                       n, model, n == 0 ? "" : " \\\n  --headless", plan.tp, plan.pp, plan.replicas, local);
    if (n > 0) out += fmt::format(" \\\n  --data-parallel-start-rank {}", n * per_node);
    out += " \\\n  --data-parallel-address \"$HEAD\" \\\n  --data-parallel-rpc-port 13345";
    out += vllm_engine_limit_flags(engine) + "\n";
  }
  return out;
}

}  // namespace

std::string vllm_serve_command(const ServingPlan& plan, const ServingConfig& engine, const std::string& model,
                               int gpus_per_node, bool routed_experts) {
  if (plan.dp_attention > 1)
    throw_bad_input("--export vllm: plan 1 runs {} data-parallel attention engines, and vLLM's API server sends each "
                    "request to the engine with the fewest waiting x 4 + running requests (DPLBAsyncMPClient, "
                    "vllm/v1/engine/core_client.py), not in turn as simulated; export sglang (--load-balance-method "
                    "round_robin)",
                    plan.dp_attention);
  const int engine_gpus = plan.tp * plan.pp;
  const bool across_nodes = engine_gpus > gpus_per_node;
  if (plan.replicas > 1 && routed_experts)
    return independent_servers(plan, engine, model, gpus_per_node,
                               "vLLM's data-parallel ranks of an MoE model step together, which was not simulated");
  if (plan.replicas > 1 && across_nodes)
    return independent_servers(plan, engine, model, gpus_per_node, "each engine spans nodes, on a Ray cluster of its own");
  if (plan.replicas > 1 && plan.replicas * engine_gpus > gpus_per_node)
    return data_parallel_over_nodes(plan, engine, model, gpus_per_node);
  std::string out;
  if (across_nodes)
    out += fmt::format("# one engine spans {} GPUs, more than a node's {}: start a Ray cluster over its nodes and run\n"
                       "# this on its head node\n",
                       engine_gpus, gpus_per_node);
  out += fmt::format("vllm serve {} \\\n  --tensor-parallel-size {} \\\n  --pipeline-parallel-size {}", model, plan.tp,
                     plan.pp);
  if (plan.replicas > 1) out += fmt::format(" \\\n  --data-parallel-size {}", plan.replicas);
  if (across_nodes) out += " \\\n  --distributed-executor-backend ray";
  return out + vllm_engine_limit_flags(engine) + "\n";
}

}  // namespace pw
