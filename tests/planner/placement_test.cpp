#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/cluster.hpp"
#include "partition_test_util.hpp"
#include "planner/placement.hpp"
#include "sim/scenario.hpp"

using namespace pw;
using namespace pw::test;

namespace {

// 2 nodes of 8 GPUs: NVLink 2^38 B/s inside a node, 2^34 B/s between nodes (16x slower).
Cluster two_nodes() {
  Cluster c;
  c.name = "two";
  c.nodes = 2;
  c.gpus_per_node = 8;
  c.gpu = GpuSpec{"g", 1e15, 80e9, 2e12};
  c.intra_node = LinkSpec{274877906944.0, 1e-6};
  c.inter_node = LinkSpec{17179869184.0, 5e-6};
  return c;
}

ParallelConfig config(int tp, int pp, int dp) {
  ParallelConfig pc;
  pc.tp = tp;
  pc.pp = pp;
  pc.dp = dp;
  return pc;
}

}  // namespace

TEST_CASE("rank layouts: tp innermost, then pp then dp, or dp then pp") {
  const ParallelConfig pc = config(2, 2, 3);
  // tp-pp-dp: dp_idx (pp tp) + pp_idx tp + tp_idx; tp-dp-pp: pp_idx (dp tp) + dp_idx tp + tp_idx.
  CHECK(global_rank(pc, RankOrder::TpPpDp, 1, 1, 2) == 2 * 4 + 1 * 2 + 1);
  CHECK(global_rank(pc, RankOrder::TpDpPp, 1, 1, 2) == 1 * 6 + 2 * 2 + 1);
  CHECK(global_rank(pc, RankOrder::TpPpDp, 0, 1, 0) == 2);
  CHECK(global_rank(pc, RankOrder::TpDpPp, 0, 1, 0) == 6);
  // The simulator's pipeline_rank_gpu is the default order's replica 0, tp rank 0.
  for (int r = 0; r < pc.pp; ++r) CHECK(pipeline_rank_gpu(pc, r) == global_rank(pc, RankOrder::TpPpDp, 0, r, 0));
  CHECK(std::string(to_string(RankOrder::TpDpPp)) == "tp-dp-pp");
  CHECK(rank_order_from_string("tp-pp-dp") == RankOrder::TpPpDp);
  CHECK(bad_input([] { rank_order_from_string("pp-tp-dp"); }) ==
        "--rank-order: 'pp-tp-dp' is not a rank order; use tp-pp-dp or tp-dp-pp");
}

TEST_CASE("the placement reports node and local GPU of every rank") {
  Cluster c = two_nodes();
  c.gpus_per_node = 4;
  const std::vector<GpuPlace> places = place_ranks(config(2, 2, 2), c);
  REQUIRE(places.size() == 8);
  // Rank 5 = dp 1 (x 4) + pp 0 + tp 1: node 1 (ranks 4-7), its GPU 1.
  CHECK(places[5].node == 1);
  CHECK(places[5].local_gpu == 1);
  CHECK(places[5].tp_idx == 1);
  CHECK(places[5].pp_idx == 0);
  CHECK(places[5].dp_idx == 1);
  CHECK(placement_to_text({places[5], places[6]}) ==
        "rank 5 -> node 1 gpu 1 (tp 1, pp 0, dp 1)\nrank 6 -> node 1 gpu 2 (tp 0, pp 1, dp 1)\n");
  const std::vector<GpuPlace> other = place_ranks(config(2, 2, 2), c, RankOrder::TpDpPp);
  CHECK(other[5].pp_idx == 1);  // 1 x (2 x 2) + 0 x 2 + 1
  CHECK(other[5].dp_idx == 0);

  CHECK(bad_input([&] { place_ranks(config(3, 1, 1), two_nodes()); }) ==
        "--tp: 3 does not divide the 8 GPUs of a node in cluster 'two', so a tp group would span two nodes; use a "
        "divisor of 8");
  CHECK(bad_input([&] { place_ranks(config(8, 2, 2), two_nodes()); }) ==
        "tp x cp x pp x dp = 32 GPUs but cluster 'two' has 16 (2 x 8); use fewer GPUs or a cluster file with more nodes");
}

TEST_CASE("the rank order keeps the heavier traffic off the slow links") {
  // tp = 4, pp = 2, dp = 2 on 2 x 8 GPUs. tp-pp-dp puts a whole pipeline in a node (p2p on NVLink) and
  // the dp peers 8 ranks apart, on two nodes; tp-dp-pp puts both replicas of a stage in a node (dp on
  // NVLink) and the pipeline across nodes.
  const Cluster c = two_nodes();
  const ParallelConfig pc = config(4, 2, 2);
  const double nv = c.intra_node.bandwidth_bytes_per_s, ib = c.inter_node.bandwidth_bytes_per_s;

  // Large activations, small gradients: 64 micro-batches of 2^27 bytes; 2^20 bytes of gradients.
  const PipelineTraffic heavy_p2p{{RankTransfer{0, 1, 134217728.0}}, 64, {1048576.0, 1048576.0}};
  // Link seconds: p2p = dp x tp x 2 directions x m x bytes / bw; dp = pp x tp x dp hops x
  // 2 (dp - 1) / dp x bytes / bw (= 1 x bytes per hop with dp = 2).
  const OrderCost a = rank_order_cost(pc, c, heavy_p2p, RankOrder::TpPpDp);
  CHECK(a.p2p_link_s == Approx(2 * 4 * 2 * 64 * 134217728.0 / nv));
  CHECK(a.dp_link_s == Approx(2 * 4 * 2 * 1048576.0 / ib));
  const OrderCost b = rank_order_cost(pc, c, heavy_p2p, RankOrder::TpDpPp);
  CHECK(b.p2p_link_s == Approx(2 * 4 * 2 * 64 * 134217728.0 / ib));
  CHECK(b.dp_link_s == Approx(2 * 4 * 2 * 1048576.0 / nv));
  CHECK(choose_rank_order(pc, c, heavy_p2p) == RankOrder::TpPpDp);

  // Small activations, large gradients (2^33 bytes per stage and tp rank): the dp ring belongs in a node.
  const PipelineTraffic heavy_dp{{RankTransfer{0, 1, 1048576.0}}, 4, {8589934592.0, 8589934592.0}};
  CHECK(choose_rank_order(pc, c, heavy_dp) == RankOrder::TpDpPp);
  CHECK(rank_order_cost(pc, c, heavy_dp, RankOrder::TpDpPp).total_s() <
        rank_order_cost(pc, c, heavy_dp, RankOrder::TpPpDp).total_s());

  // On one node, or the ideal cluster, nothing crosses a slow link: the default stays.
  CHECK(choose_rank_order(config(1, 2, 2), c, heavy_dp) == RankOrder::TpPpDp);
  CHECK(choose_rank_order(pc, cluster_preset("ideal"), heavy_dp) == RankOrder::TpPpDp);
}

TEST_CASE("a split's traffic: every boundary between ranks, and each rank's gradients") {
  // Interleaved p = 2, v = 2 (stages 0, 2 on rank 0; 1, 3 on rank 1): boundaries 0->1, 1->0 (stage 1
  // to stage 2) and 0->1; gradients 4 bytes a parameter summed over a rank's chunks. V placement (rank 0
  // holds 0 and 3, rank 1 holds 1 and 2): stages 1 and 2 share rank 1, so no transfer between them.
  std::vector<StageCost> stages(4);
  for (int s = 0; s < 4; ++s) {
    stages[static_cast<size_t>(s)].output_bytes = 1000.0 * (s + 1);
    stages[static_cast<size_t>(s)].parameters = 10.0 * (s + 1);
  }
  const PipelineTraffic loop = pipeline_traffic(stages, Placement::loop(2, 2), 8);
  REQUIRE(loop.p2p.size() == 3);
  CHECK(loop.p2p[1].from_rank == 1);
  CHECK(loop.p2p[1].to_rank == 0);
  CHECK(loop.p2p[1].bytes_per_microbatch == 2000);
  CHECK(loop.dp_gradient_bytes == std::vector<double>{4 * (10 + 30), 4 * (20 + 40)});
  const PipelineTraffic v = pipeline_traffic(stages, Placement::v(2), 8);
  REQUIRE(v.p2p.size() == 2);
  CHECK(v.p2p[0].from_rank == 0);
  CHECK(v.p2p[1].from_rank == 1);
  CHECK(v.p2p[1].to_rank == 0);
  CHECK(v.p2p[1].bytes_per_microbatch == 3000);
}

TEST_CASE("mixed clusters: node groups give each GPU its type and memory, and round-trip") {
  const std::string text = R"({"name": "mixed", "gpus_per_node": 8,
    "node_groups": [
      {"nodes": 2, "gpu": {"name": "A100", "peak_tflops": 312, "memory_bytes": 40e9, "hbm_bytes_per_s": 1.555e12}},
      {"nodes": 1, "gpu": {"name": "H100", "peak_tflops": 989, "memory_bytes": 80e9, "hbm_bytes_per_s": 3.35e12}}],
    "intra_node": {"bandwidth_bytes_per_s": 300e9, "latency_s": 3e-6},
    "inter_node": {"bandwidth_bytes_per_s": 25e9, "latency_s": 8e-6}})";
  const Cluster c = cluster_from_json_text(text, "mixed.json");
  CHECK(c.nodes == 3);
  CHECK(c.gpu.name == "A100");
  CHECK(c.gpu_at(15).name == "A100");
  CHECK(c.gpu_at(16).name == "H100");
  CHECK(c.gpu_at(23).peak_flops == 989e12);
  CHECK(c.memory_capacity_at(3) == 40e9);
  CHECK(c.memory_capacity_at(20) == 80e9);
  CHECK(c.memory_capacity() == 40e9);  // the smallest
  CHECK(c.memory_limit_at(20) == 80e9 * (1 - kDefaultMemoryHeadroom));
  CHECK(c.memory_limit() == 40e9 * (1 - kDefaultMemoryHeadroom));
  CHECK(bad_input([&] { c.gpu_at(24); }) == "runtime error: cluster 'mixed': GPU 24 is outside its 3 nodes of 8 GPUs");
  CHECK(bad_input([&] { c.check_capacity(32); }) ==
        "tp x cp x pp x dp = 32 GPUs but cluster 'mixed' has 24 (3 x 8); use fewer GPUs or a cluster file with more nodes");

  const std::string out = cluster_to_json_text(c);
  CHECK(out.find("\"node_groups\"") != std::string::npos);
  CHECK_FALSE(nlohmann::json::parse(out).contains("gpu"));  // only inside the groups
  const Cluster back = cluster_from_json_text(out, "mixed.json");
  CHECK(cluster_to_json_text(back) == out);
  REQUIRE(back.node_groups.size() == 2);
  CHECK(back.node_groups[1].nodes == 1);
  CHECK(back.node_groups[1].gpu.memory_bytes == 80e9);
  CHECK(back.gpu_at(16).hbm_bytes_per_s == 3.35e12);

  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  CHECK(bad_input([&] { cluster_from_json_text(with("\"gpus_per_node\": 8,", "\"gpus_per_node\": 8, \"nodes\": 4,"), "m.json"); }) ==
        "m.json: nodes is 4 but the node groups hold 3 nodes; give 3 or leave it out");
  CHECK(bad_input([&] {
          cluster_from_json_text(with("\"gpus_per_node\": 8,",
                                      R"("gpus_per_node": 8, "gpu": {"name": "g", "peak_tflops": 1, "memory_bytes": 1, "hbm_bytes_per_s": 1},)"),
                                 "m.json");
        }) == "m.json: give either \"gpu\" (one GPU type) or \"node_groups\" (mixed types), not both");
  CHECK(bad_input([&] { cluster_from_json_text(with("{\"nodes\": 1,", "{\"nodes\": 0,"), "m.json"); }) ==
        "m.json: node_groups[1].nodes must be positive, got 0");
  CHECK(bad_input([&] { cluster_from_json_text(with("\"peak_tflops\": 989", "\"peak_tflop\": 989"), "m.json"); }) ==
        "m.json: unknown field 'node_groups[1].gpu.peak_tflop'; known fields: name, peak_tflops, fp8_peak_tflops, memory_bytes, "
        "hbm_bytes_per_s");
}
