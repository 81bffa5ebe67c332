// serve plan's disaggregated plans (planner/disaggregated_plan.hpp) for a mixture of experts: either pool may be
// groups of data-parallel attention engines, counted by the estimate as the planner tries them, and a plan found so
// simulates again to the same figures (planner/serving_capacity.hpp's evaluate_plan).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/model.hpp"
#include "planner/disaggregated_plan.hpp"
#include "planner/serving_capacity.hpp"
#include "planner/serving_plan_estimate.hpp"

using namespace pw;

TEST_CASE("disaggregated plans of a mixture of experts: data-parallel attention pools on either side, as counted") {
  const Model m = model_preset("qwen3-30b-a3b");
  const Cluster cluster = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  std::vector<ServingRequest> requests;
  for (int i = 0; i < 64; ++i) requests.push_back({0.02 * i, 1024, 32});
  const ServingEngineFor engine_for = same_engine(ServingConfig{});
  // The pools of 4 GPUs: the tp x pp engines serving_engine_shapes gives, then the 3 groups dp_attention_shapes gives
  // (2 groups of 2 engines of tp 1, 1 of 4 of tp 1, 1 of 2 of tp 2), each filling the pool; a dense model none.
  const std::vector<PoolShape> shapes = pool_shapes(m, cluster, engine_for, 4);
  int groups = 0;
  for (const PoolShape& s : shapes) {
    CHECK(s.pool.gpus() == 4);
    CHECK(s.dp == s.pool.dp_attention);
    groups += s.dp > 1;
  }
  CHECK(groups == 3);
  CHECK(pool_shapes(model_preset("llama3-8b"), cluster, engine_for, 4).size() == shapes.size() - 3);

  const ServingPlanResult r = plan_serving(m, cluster, cost, 8, engine_for, requests, ServingSlo{}, 0, true, 1);
  const WorkEstimate estimate = serving_plan_estimate(m, cluster, 8, true, 0, engine_for, requests);
  INFO(estimate.work);
  CHECK(estimate.work.find(fmt::format("the prefill pools and {} configurations", r.considered)) == 0);
  bool prefill_groups = false, decode_groups = false;
  for (const ServingPlan& p : r.plans) {
    if (!p.disaggregated()) continue;
    const int gpus = p.prefill_tp * p.prefill_pp * p.prefill_dp_attention * p.prefill_replicas +
                     p.tp * p.pp * p.dp_attention * p.replicas;
    CHECK(gpus == 8);
    prefill_groups = prefill_groups || p.prefill_dp_attention > 1;
    decode_groups = decode_groups || p.dp_attention > 1;
    if (p.prefill_dp_attention > 1 && p.dp_attention > 1) {
      // Simulated again from its shape alone: the same figures.
      const ServingPlan again = evaluate_plan(m, cluster, cost, engine_for, p, requests, ServingSlo{});
      CHECK(again.metrics.output_tokens_per_s == p.metrics.output_tokens_per_s);
      CHECK(again.metrics.ttft_p99_s == p.metrics.ttft_p99_s);
      CHECK(again.kv_capacity_tokens == p.kv_capacity_tokens);
    }
  }
  CHECK(prefill_groups);
  CHECK(decode_groups);
}
