#include "exports/disaggregated.hpp"

#include <fmt/format.h>

#include <vector>

#include "core/error.hpp"
#include "exports/sglang.hpp"
#include "exports/vllm.hpp"
#include "planner/server_placement.hpp"

namespace pw {

namespace {

struct PoolShape {
  const char* name;  // "prefill" or "decode"
  int tp, pp, replicas;
  int first_gpu;  // in the cluster: the prefill pool first, the decode pool after it
  int dp = 1;     // > 1: each server a group of dp data-parallel attention engines of tp GPUs
  int server_gpus() const { return tp * pp * dp; }
  std::string engine_text() const {
    return dp > 1 ? fmt::format("{} data-parallel attention engines of tp {} (ep {})", dp, tp, dp * tp)
                  : fmt::format("tp {} x pp {}", tp, pp);
  }
};

std::vector<ServerPlace> place_pool(const PoolShape& pool, int gpus_per_node) {
  return place_servers({fmt::format("the {} pool's {}", pool.name, pool.dp > 1 ? "group" : "engine"), pool.engine_text(),
                        "export the best single pool (leave out --disaggregate)", pool.first_gpu, pool.server_gpus(),
                        pool.replicas},
                       gpus_per_node);
}

struct Layout {
  PoolShape prefill, decode;
  std::vector<ServerPlace> prefill_places, decode_places;
  int nodes = 1;  // the nodes the servers use
};

Layout layout_of(const ServingPlan& plan, int gpus_per_node) {
  if (!plan.disaggregated()) throw_bad_input("--export: plan 1 has one pool; it is exported without a router");
  const int prefill_gpus = plan.prefill_tp * plan.prefill_pp * plan.prefill_dp_attention * plan.prefill_replicas;
  Layout l{{"prefill", plan.prefill_tp, plan.prefill_pp, plan.prefill_replicas, 0, plan.prefill_dp_attention},
           {"decode", plan.tp, plan.pp, plan.replicas, prefill_gpus, plan.dp_attention},
           {},
           {},
           1};
  check_server_count(plan.prefill_replicas + plan.replicas, "plan fewer, wider engines (--gpus)");
  l.prefill_places = place_pool(l.prefill, gpus_per_node);
  l.decode_places = place_pool(l.decode, gpus_per_node);
  const ServerPlace& last = l.decode_places.back();
  l.nodes = last.node + last.nodes;
  return l;
}

std::string pool_text(const PoolShape& pool) {
  const int gpus = pool.server_gpus() * pool.replicas;
  const char* server = pool.dp > 1 ? "group" : "engine";
  return fmt::format("{} pool: {} {}{} of {} on the cluster's GPUs {}-{}", pool.name, pool.replicas, server,
                     pool.replicas == 1 ? "" : "s", pool.engine_text(), pool.first_gpu, pool.first_gpu + gpus - 1);
}

// The lines every export starts with: the pools, and the node addresses the commands use.
std::string header(const Layout& l, int gpus_per_node) {
  return fmt::format("# {}\n# {}\n", pool_text(l.prefill), pool_text(l.decode)) + nodes_text(l.nodes, gpus_per_node);
}

}  // namespace

std::string sglang_disaggregated_commands(const ServingPlan& plan, const ServingConfig& prefill_engine,
                                          const ServingConfig& decode_engine, const std::string& model,
                                          int gpus_per_node) {
  const Layout l = layout_of(plan, gpus_per_node);
  std::string out = header(l, gpus_per_node);
  out += "# KV caches go over SGLang's default transfer backend, mooncake (pip install mooncake-transfer-engine); add\n"
         "# --disaggregation-ib-device where its device detection picks the wrong NICs\n";
  constexpr int kFirstPort = 30000, kFirstBootstrapPort = 8998;
  std::string router = "python -m sglang_router.launch_router \\\n  --pd-disaggregation";
  int server = 0;
  const auto add_servers = [&](const PoolShape& pool, const std::vector<ServerPlace>& places, ServerRole role) {
    const bool prefill = role == ServerRole::Prefill;
    for (size_t e = 0; e < places.size(); ++e, ++server) {
      const ServerPlace& p = places[e];
      const int port = kFirstPort + server;
      std::string flags = fmt::format(" \\\n  --disaggregation-mode {}", prefill ? "prefill" : "decode");
      // The decode servers read the prefill pool's tp, dp and pp from its bootstrap server (SGLang 0.5.23:
      // PrefillServerInfo in srt/disaggregation/common/conn.py): no flag names the other pool's shape.
      if (prefill)
        flags += fmt::format(" \\\n  --disaggregation-bootstrap-port {}", kFirstBootstrapPort + static_cast<int>(e));
      flags += fmt::format(" \\\n  --host 0.0.0.0 \\\n  --port {} \\\n  --base-gpu-id {}", port, p.local_gpu);
      const ServingConfig& engine = prefill ? prefill_engine : decode_engine;
      flags += pool.dp > 1 ? sglang_dp_attention_flags(pool.tp, pool.dp, engine, role)
                           : sglang_engine_flags(pool.tp, pool.pp, 1, engine, role);
      const std::string launch = "python -m sglang.launch_server --model-path " + model + flags;
      out += sglang_server_commands(fmt::format("{} server {}", pool.name, e), p, launch);
      router += prefill ? fmt::format(" \\\n  --prefill \"http://$NODE{}:{}\" {}", p.node, port,
                                      kFirstBootstrapPort + static_cast<int>(e))
                        : fmt::format(" \\\n  --decode \"http://$NODE{}:{}\"", p.node, port);
    }
  };
  add_servers(l.prefill, l.prefill_places, ServerRole::Prefill);
  add_servers(l.decode, l.decode_places, ServerRole::Decode);
  out += "# the router, on any host that reaches the servers: each request to the next prefill and the next decode\n"
         "# server in turn, as simulated; clients send to its port 8000\n";
  out += router + " \\\n  --prefill-policy round_robin \\\n  --decode-policy round_robin \\\n  --host 0.0.0.0 \\\n  --port 8000\n";
  return out;
}

std::string vllm_disaggregated_commands(const ServingPlan& plan, const ServingConfig& prefill_engine,
                                        const ServingConfig& decode_engine, const std::string& model,
                                        int gpus_per_node) {
  const Layout l = layout_of(plan, gpus_per_node);
  for (const PoolShape* pool : {&l.prefill, &l.decode})
    if (pool->dp > 1)
      throw_bad_input("--export vllm: the {} pool runs {} data-parallel attention engines, and vLLM's API server sends "
                      "each request to the engine with the fewest waiting x 4 + running requests, not in turn as "
                      "simulated; export sglang",
                      pool->name, pool->dp);
  for (const PoolShape* pool : {&l.prefill, &l.decode})
    if (pool->tp * pool->pp > gpus_per_node)
      throw_bad_input("--export vllm: the {} pool's engines (tp {} x pp {}) are wider than a node's {} GPUs: vLLM runs "
                      "such an engine on Ray, where the NIXL side channel of its other nodes is not set by the "
                      "variables this export writes; export sglang, or plan engines of at most {} GPUs",
                      pool->name, pool->tp, pool->pp, gpus_per_node, gpus_per_node);
  std::string out = header(l, gpus_per_node);
  out += "# KV caches go over NIXL (pip install nixl; UCX picks the transport: set UCX_NET_DEVICES to pin the NICs)\n";
  constexpr int kFirstPort = 20000, kFirstSideChannelPort = 5600;
  std::string router = "vllm-router \\\n  --vllm-pd-disaggregation";
  int server = 0;
  const auto add_servers = [&](const PoolShape& pool, const std::vector<ServerPlace>& places, bool prefill) {
    for (size_t e = 0; e < places.size(); ++e, ++server) {
      const ServerPlace& p = places[e];
      const int port = kFirstPort + server;
      std::string devices;
      for (int g = p.local_gpu; g < p.local_gpu + p.gpus; ++g) devices += fmt::format("{}{}", devices.empty() ? "" : ",", g);
      out += fmt::format("# {} server {}: {}\n", pool.name, e, gpus_text(p));
      out += fmt::format("CUDA_VISIBLE_DEVICES={} \\\nVLLM_NIXL_SIDE_CHANNEL_HOST=\"$NODE{}\" \\\nVLLM_NIXL_SIDE_CHANNEL_PORT={} "
                         "\\\nvllm serve {} \\\n  --host 0.0.0.0 \\\n  --port {} \\\n  --tensor-parallel-size {} \\\n  "
                         "--pipeline-parallel-size {}",
                         devices, p.node, kFirstSideChannelPort + server, model, port, pool.tp, pool.pp);
      out += vllm_engine_limit_flags(prefill ? prefill_engine : decode_engine);
      out += fmt::format(" \\\n  --kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{}\"}}'\n",
                         prefill ? "kv_producer" : "kv_consumer");
      router += fmt::format(" \\\n  --{} \"http://$NODE{}:{}\"", prefill ? "prefill" : "decode", p.node, port);
    }
  };
  add_servers(l.prefill, l.prefill_places, true);
  add_servers(l.decode, l.decode_places, false);
  out += "# the router (pip install vllm-router), on any host that reaches the servers: each request to the next\n"
         "# prefill and the next decode server in turn, as simulated; clients send to its port 8000\n";
  out += router + " \\\n  --prefill-policy round_robin \\\n  --decode-policy round_robin \\\n  --kv-connector nixl \\\n  "
                  "--host 0.0.0.0 \\\n  --port 8000\n";
  return out;
}

}  // namespace pw
