// Failures: the cluster a run keeps (core/failed_nodes.hpp), the search over at most the GPUs left
// (SearchSpace::up_to_gpus), and the re-plan on a mixed cluster that loses a node.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/failed_nodes.hpp"
#include "partition_test_util.hpp"
#include "planner/failure_report.hpp"
#include "planner/search.hpp"

using namespace pw;
using namespace pw::test;

namespace {

// Two nodes of four fast GPUs, then two of four slow ones.
Cluster mixed() {
  return cluster_from_json_text(R"({"name": "mixed", "gpus_per_node": 4,
    "node_groups": [
      {"nodes": 2, "gpu": {"name": "fast", "peak_tflops": 989, "memory_bytes": 80e9, "hbm_bytes_per_s": 3.35e12}},
      {"nodes": 2, "gpu": {"name": "slow", "peak_tflops": 312, "memory_bytes": 80e9, "hbm_bytes_per_s": 2.0e12}}],
    "intra_node": {"bandwidth_bytes_per_s": 300e9, "latency_s": 3e-6},
    "inter_node": {"bandwidth_bytes_per_s": 25e9, "latency_s": 8e-6}})",
                                "mixed.json");
}

Scenario base_on(const Cluster& c) {
  Scenario s;
  s.model = model_preset("gpt3-1.3b");
  s.cluster = c;
  s.global_batch_size = 32;
  s.workload.seq_len = 1024;
  return s;
}

SearchSpace space_of(int gpus) {
  SearchSpace space;
  space.gpus = gpus;
  space.schedules = {"1f1b", "interleaved"};
  return space;
}

}  // namespace

TEST_CASE("a failed node leaves the others in order with their GPU types and measured links") {
  Cluster c = mixed();
  Cluster one = without_nodes(c, 4, {1});
  CHECK(one.nodes == 3);
  REQUIRE(one.node_groups.size() == 2);
  CHECK(one.node_groups[0].nodes == 1);
  CHECK(one.node_groups[0].gpu.name == "fast");
  CHECK(one.node_groups[1].nodes == 2);
  CHECK(one.gpu_at(3).name == "fast");
  CHECK(one.gpu_at(4).name == "slow");
  const Cluster fast_gone = without_nodes(c, 4, {0, 1});
  REQUIRE(fast_gone.node_groups.size() == 1);
  CHECK(fast_gone.gpu.name == "slow");
  CHECK(fast_gone.gpu_at(0).name == "slow");
  // A run on the first three nodes only: the fourth is not the run's.
  CHECK(without_nodes(c, 3, {2}).nodes == 2);
  CHECK(without_nodes(c, 3, {2}).node_groups.size() == 1);

  // Measured links follow their GPUs.
  Cluster measured = cluster_preset("dgx-h100");
  measured.gpus_per_node = 2;
  measured.nodes = 2;
  LinkMatrix m;
  m.gpus = 4;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) m.links.push_back(LinkSpec{1e9 * (10 * a + b + 1), 1e-6});
  measured.measured = m;
  const Cluster kept = without_nodes(measured, 2, {0});
  REQUIRE(kept.measured);
  CHECK(kept.measured->gpus == 2);
  CHECK(kept.link(0, 1).bandwidth_bytes_per_s == 1e9 * (10 * 2 + 3 + 1));
  CHECK(kept.link(1, 0).bandwidth_bytes_per_s == 1e9 * (10 * 3 + 2 + 1));

  CHECK(bad_input([&] { without_nodes(c, 4, {4}); }) ==
        "--failed-nodes: node 4 is not one of the run's nodes, 0 to 3; give indices in that range");
  CHECK(bad_input([&] { without_nodes(c, 4, {2, 2}); }) == "--failed-nodes: node 2 is listed twice; list each node once");
  CHECK(bad_input([&] { without_nodes(c, 4, {0, 1, 2, 3}); }) ==
        "--failed-nodes: all 4 nodes of the run failed; nothing is left to re-plan on");
}

TEST_CASE("a search over at most n GPUs keeps the global batch and is never slower than the exact search") {
  const AnalyticCostModel cost;
  const Scenario base = base_on(cluster_preset("dgx-h100"));
  SearchOptions o;
  o.top = 3;
  SearchSpace up_to = space_of(16);
  up_to.up_to_gpus = true;
  const SearchResult loose = search_plans(base, up_to, cost, o);
  const SearchResult exact = search_plans(base, space_of(16), cost, o);
  CHECK(loose.plans.front().evaluation.metrics.step_time_s <= exact.plans.front().evaluation.metrics.step_time_s);
  // 12 GPUs left: every candidate uses at most 12, keeps 32 sequences, and takes the most replicas that fit.
  SearchSpace left = space_of(12);
  left.up_to_gpus = true;
  for (const Candidate& c : enumerate_candidates(base, left)) {
    INFO(describe(c));
    CHECK(plan_gpus(c) <= 12);
    CHECK(c.micro_batch_size * c.microbatches * c.dp == 32);
    int more = c.dp + 1;
    while (more <= 32 && 32 % more != 0) ++more;
    CHECK((more > 32 || c.tp * c.cp * c.pp * more > 12));
  }
}

TEST_CASE("re-planning a mixed cluster that loses a fast node") {
  const AnalyticCostModel cost;
  const Scenario base = base_on(mixed());
  SearchOptions o;
  o.top = 2;
  const SearchResult before = search_plans(base, space_of(16), cost, o);
  Scenario left = base;
  left.cluster = without_nodes(base.cluster, 4, {1});
  const AfterFailure after = replan(left, space_of(16), 12, cost, o, before.plans.front(), 16);
  REQUIRE(after.report);
  const Plan& p = after.result.plans.front();
  CHECK(plan_gpus(p.config) <= 12);
  CHECK(after.report->gpus_used == plan_gpus(p.config));
  CHECK(after.report->gpus_lost == 0.25);
  CHECK(after.report->throughput_lost ==
        1 - p.evaluation.metrics.throughput_tokens_per_s / before.plans.front().evaluation.metrics.throughput_tokens_per_s);
  CHECK(after.report->throughput_lost > 0);
  // The plan runs on what is left: one fast node first, then the slow ones.
  const Cluster& runs_on = p.evaluation.scenario.cluster;
  REQUIRE(runs_on.node_groups.size() == 2);
  CHECK(runs_on.node_groups[0].nodes == 1);
  CHECK(runs_on.gpu_at(0).name == "fast");
  CHECK(runs_on.gpu_at(4).name == "slow");
  // The same as searching the reduced cluster directly.
  SearchSpace direct = space_of(12);
  direct.up_to_gpus = true;
  const SearchResult again = search_plans(left, direct, cost, o);
  CHECK(again.plans.front().config == p.config);
  CHECK(again.plans.front().evaluation.metrics.step_time_s == p.evaluation.metrics.step_time_s);
  CHECK(after.report->changes.find(after.report->same_split ? "; the same split" : "; a new split") != std::string::npos);
}
