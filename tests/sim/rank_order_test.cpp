// Where ranks sit decides which links the pipeline's transfers and the data-parallel reductions use, and
// on a cluster of mixed GPUs which replica is slowest: evaluate() simulates the configuration's own rank
// order and every distinct replica, and reports the slowest.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/model.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

Cluster two_nodes(const char* second_gpu) {
  return cluster_from_json_text(fmt::format(R"({{"name": "2 nodes", "gpus_per_node": 8, "node_groups": [
      {{"nodes": 1, "gpu": {{"name": "A100", "peak_tflops": 312, "memory_bytes": 80e9, "hbm_bytes_per_s": 2.039e12}}}},
      {{"nodes": 1, "gpu": {}}}],
      "intra_node": {{"bandwidth_bytes_per_s": 300e9, "latency_s": 3e-6}},
      "inter_node": {{"bandwidth_bytes_per_s": 25e9, "latency_s": 8e-6}}}})",
                                            second_gpu),
                                "two nodes");
}

constexpr const char* kA100 = R"({"name": "A100", "peak_tflops": 312, "memory_bytes": 80e9, "hbm_bytes_per_s": 2.039e12})";
constexpr const char* kH100 = R"({"name": "H100", "peak_tflops": 989, "memory_bytes": 80e9, "hbm_bytes_per_s": 3.35e12})";

Scenario scenario(const Cluster& cluster, int pp, int dp, RankOrder order) {
  Scenario s;
  s.model = model_preset("gpt3-1.3b");
  s.cluster = cluster;
  s.parallel.pp = pp;
  s.parallel.dp = dp;
  s.parallel.order = order;
  s.parallel.microbatches = 8;
  s.parallel.overlap_grad_reduce = false;  // one reduction per stage: its time is the whole collective
  s.workload.seq_len = 1024;
  return s;
}

}  // namespace

TEST_CASE("rank orders place pipeline ranks and replicas by their closed forms", "[sim][placement]") {
  ParallelConfig pc;
  pc.tp = 2;
  pc.pp = 4;
  pc.dp = 3;
  // tp-pp-dp: global = (d pp + r) tp; tp-dp-pp: global = (r dp + d) tp.
  pc.order = RankOrder::TpPpDp;
  CHECK(pipeline_rank_gpu(pc, 3, 2) == (2 * 4 + 3) * 2);
  CHECK(dp_stride(pc) == 8);
  pc.order = RankOrder::TpDpPp;
  CHECK(pipeline_rank_gpu(pc, 3, 2) == (3 * 3 + 2) * 2);
  CHECK(dp_stride(pc) == 2);
  CHECK(rank_order_from_string("tp-dp-pp") == RankOrder::TpDpPp);
  CHECK_THROWS_WITH(rank_order_from_string("pp-tp-dp"),
                    "--rank-order: 'pp-tp-dp' is not a rank order; use tp-pp-dp or tp-dp-pp");
}

TEST_CASE("the rank order sets the links of pipeline transfers and gradient reductions", "[sim][placement]") {
  // pp 2 x dp 8 on two 8-GPU nodes. tp-pp-dp: a pipeline's two ranks are neighbours (one node) and a
  // stage's 8 dp peers are every other GPU of both nodes (the ring crosses the network, four ports a node). tp-dp-pp: pipeline
  // rank r holds node r, so the 8 dp peers share a node (NVLink ring) and every pipeline transfer crosses.
  const AnalyticCostModel cost;
  const Cluster cluster = two_nodes(kA100);
  const Evaluation pp_close = evaluate(scenario(cluster, 2, 8, RankOrder::TpPpDp), cost);
  const Evaluation dp_close = evaluate(scenario(cluster, 2, 8, RankOrder::TpDpPp), cost);
  const double grads = pp_close.stages[0].cost.parameters * 4;  // fp32 gradients
  const double weights = pp_close.stages[0].cost.parameters * 2;
  auto reduce = [&](const LinkSpec& link) {
    return cost.collective_time(CollectiveKind::ReduceScatter, grads, 8, link) +
           cost.collective_time(CollectiveKind::AllGather, weights, 8, link);
  };
  // Four peers in each node drive four network ports at once (rails): 4 x the network's bandwidth.
  const LinkSpec four_rails{4 * cluster.inter_node.bandwidth_bytes_per_s, cluster.inter_node.latency_s};
  CHECK(pp_close.stages[0].cost.grad_reduce_s == Approx(reduce(four_rails)).epsilon(1e-12));
  CHECK(dp_close.stages[0].cost.grad_reduce_s == Approx(reduce(cluster.intra_node)).epsilon(1e-12));
  CHECK(pp_close.sim.ranks[0].p2p_bytes_sent > 0);
  // The same bytes cross between the stages either way; only the link differs.
  CHECK(pp_close.sim.ranks[0].p2p_bytes_sent == dp_close.sim.ranks[0].p2p_bytes_sent);
  CHECK(pp_close.metrics.step_time_s != dp_close.metrics.step_time_s);
}

TEST_CASE("on a mixed cluster every replica is simulated and the slowest reported", "[sim][placement]") {
  // pp 4 x dp 4, tp-pp-dp, on one A100 node then one H100 node: replicas 0 and 1 run on A100s, 2 and 3
  // on H100s. The A100 replica sets the step: the same as on two A100 nodes, where every replica is
  // alike. MFU is against the mean peak of all 16 GPUs in use: (312 + 989) / 2 TFLOP/s.
  const AnalyticCostModel cost;
  const Evaluation mixed = evaluate(scenario(two_nodes(kH100), 4, 4, RankOrder::TpPpDp), cost);
  const Evaluation a100 = evaluate(scenario(two_nodes(kA100), 4, 4, RankOrder::TpPpDp), cost);
  CHECK(mixed.replica == 0);
  CHECK(mixed.metrics.step_time_s == a100.metrics.step_time_s);
  CHECK(mixed.metrics.mfu == Approx(a100.metrics.mfu * 312 / ((312 + 989) / 2.0)).epsilon(1e-12));

  // H100s first: the slowest replica is the first on the A100 node, replica 2.
  const Cluster h100_first = cluster_from_json_text(fmt::format(R"({{"name": "2 nodes", "gpus_per_node": 8,
      "node_groups": [{{"nodes": 1, "gpu": {}}}, {{"nodes": 1, "gpu": {}}}],
      "intra_node": {{"bandwidth_bytes_per_s": 300e9, "latency_s": 3e-6}},
      "inter_node": {{"bandwidth_bytes_per_s": 25e9, "latency_s": 8e-6}}}})",
                                                                kH100, kA100),
                                                    "h100 first");
  const Evaluation flipped = evaluate(scenario(h100_first, 4, 4, RankOrder::TpPpDp), cost);
  CHECK(flipped.replica == 2);
  CHECK(flipped.metrics.step_time_s == a100.metrics.step_time_s);
}
