// The search's dimensions of today's runs: context parallelism, precision, the ZeRO level each plan
// needs, and twins folded into one row.
#include <catch2/catch.hpp>

#include <set>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "planner/search.hpp"
#include "small_cluster.hpp"

using namespace pw;
using pw::test::small_cluster;

namespace {


std::set<int> cps_of(const std::vector<Candidate>& candidates) {
  std::set<int> out;
  for (const Candidate& c : candidates) out.insert(c.cp);
  return out;
}

// gpt3-2.7b with tp 1, pp 1, dp 8 on 24 GB GPUs: 2.7e9 parameters x (2 + 4 + 12 / 8) bytes of ZeRO-1 state
// leave no room for the activations; ZeRO-2 shards the gradients too and fits.
Scenario dp8_scenario() {
  Scenario s;
  s.model = model_preset("gpt3-2.7b");
  s.cluster = small_cluster();
  s.global_batch_size = 16;
  s.workload.seq_len = 1024;
  return s;
}

SearchSpace dp8_space() {
  SearchSpace space;
  space.gpus = 8;
  space.tp = 1;
  space.pp = 1;
  space.schedules = {"1f1b"};
  space.recomputes = {Recompute::None};
  return space;
}

}  // namespace

TEST_CASE("cp is searched in powers of two that leave each rank kMinCpTokens of the sequence") {
  Scenario base;
  base.model = model_preset("llama3-8b");
  base.cluster = cluster_preset("ideal");
  base.global_batch_size = 8;
  base.workload.seq_len = 16384;
  SearchSpace space;
  space.gpus = 16;
  space.tp = 1;
  space.schedules = {"1f1b"};
  space.recomputes = {Recompute::None};
  // 16384 / 4 = 4096 tokens per rank; 8 would leave 2048.
  CHECK(cps_of(enumerate_candidates(base, space)) == std::set<int>{1, 2, 4});
  for (const Candidate& c : enumerate_candidates(base, space)) CHECK(c.cp * c.pp * c.dp == 16);
  space.max_cp = 2;
  CHECK(cps_of(enumerate_candidates(base, space)) == std::set<int>{1, 2});
  space.max_cp = 0;
  space.cp = 8;
  CHECK(cps_of(enumerate_candidates(base, space)) == std::set<int>{8});
  space.cp.reset();
  base.workload.flash_attention = false;  // the ring runs on fused attention only
  CHECK(cps_of(enumerate_candidates(base, space)) == std::set<int>{1});
  base.workload.flash_attention = true;
  base.workload.seq_len = 4096;
  CHECK(cps_of(enumerate_candidates(base, space)) == std::set<int>{1});
}

TEST_CASE("each plan runs at the lowest ZeRO level that fits") {
  const AnalyticCostModel cost;
  SearchSpace space = dp8_space();
  space.zeros = {1};
  try {
    search_plans(dp8_scenario(), space, cost);
    FAIL("ZeRO-1 fitted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("no configuration of 8 GPUs fits in memory", 0) == 0);
  }
  space.zeros = {1, 2, 3};
  SearchOptions o;
  o.top = 2;
  const SearchResult r = search_plans(dp8_scenario(), space, cost, o);
  REQUIRE(r.plans.size() == 2);
  for (const Plan& p : r.plans) {
    CHECK(p.config.zero == 2);
    CHECK(p.evaluation.scenario.parallel.zero == 2);
    CHECK(p.evaluation.metrics.overflows.empty());
  }
  // The pruned search finds what scoring every candidate at every level finds.
  o.prune = false;
  const SearchResult all = search_plans(dp8_scenario(), space, cost, o);
  REQUIRE(all.plans.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(all.plans[i].config == r.plans[i].config);
    CHECK(all.plans[i].evaluation.metrics.step_time_s == r.plans[i].evaluation.metrics.step_time_s);
  }
}

TEST_CASE("the search takes fp8 where the GPU has an fp8 peak and --precisions allows it") {
  // H200s hold fp8's weight copies (2 bytes a parameter) beside the ZeRO-1 state.
  Scenario base;
  base.model = model_preset("llama3-8b");
  base.cluster = cluster_preset("hgx-h200");
  base.global_batch_size = 16;
  SearchSpace space;
  space.gpus = 8;
  space.tp = 1;
  space.pp = 1;
  space.schedules = {"1f1b"};
  space.recomputes = {Recompute::Full};
  space.precisions = {Precision::Bf16, Precision::Fp8};
  SearchOptions o;
  o.top = 2;
  const SearchResult r = search_plans(base, space, AnalyticCostModel(), o);
  REQUIRE(r.plans.size() == 2);
  CHECK(r.plans[0].config.precision == Precision::Fp8);
  CHECK(r.plans[0].evaluation.scenario.workload.precision == Precision::Fp8);
  CHECK(describe(r.plans[0].config).find(", fp8") != std::string::npos);
}

TEST_CASE("configurations that differ only in order, schedule or recompute and time alike are one row") {
  // One node of 8 GPUs: both rank orders keep every transfer on NVLink; at pp 1 with one micro-batch every
  // schedule runs F then B.
  Scenario base;
  base.model = model_preset("gpt3-1.3b");
  base.cluster = cluster_preset("dgx-h100");
  base.global_batch_size = 16;
  base.workload.seq_len = 1024;
  SearchSpace space;
  space.gpus = 8;
  space.schedules = {"1f1b", "gpipe", "interleaved", "bfs"};
  SearchOptions o;
  o.top = 4;
  const SearchResult r = search_plans(base, space, AnalyticCostModel(), o);
  REQUIRE(r.plans.size() == 4);
  bool folded = false;
  for (size_t i = 0; i < r.plans.size(); ++i) {
    for (const Candidate& t : r.plans[i].twins) {
      folded = true;
      CHECK(same_but_order_schedule_and_recompute(r.plans[i].config, t));
      CHECK(config_less(r.plans[i].config, t));
    }
    for (size_t j = i + 1; j < r.plans.size(); ++j)
      CHECK_FALSE((r.plans[i].evaluation.metrics.step_time_s == r.plans[j].evaluation.metrics.step_time_s &&
                   same_but_order_schedule_and_recompute(r.plans[i].config, r.plans[j].config)));
  }
  CHECK(folded);
}
