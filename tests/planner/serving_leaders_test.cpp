// The serving search's leaders (planner/serving_leaders.hpp): a configuration is dropped exactly when its floor's
// caps rank it strictly below the top-th plan, and the search reports the same plans whatever it drops.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "planner/serving_leaders.hpp"
#include "serving/serving_workload.hpp"

using namespace pw;

namespace {

ServingPlan leader_plan(double tokens_per_s, double goodput_rps = 0, bool meets = true) {
  ServingPlan p;
  p.metrics.output_tokens_per_s = tokens_per_s;
  p.goodput_rps = goodput_rps;
  p.meets_slo = meets;
  return p;
}

ServingFloor floor_at(double makespan_s, std::vector<double> gaps = {}) { return {makespan_s, std::move(gaps)}; }

// Ten requests of 100 outputs: 1,000 output tokens.
const std::vector<ServingRequest> kTenRequests(10, ServingRequest{0.0, 64, 100});

}  // namespace

TEST_CASE("without SLOs a configuration is dropped when 1,000 tokens over its floor fall below the top-th plan") {
  ServingLeaders leaders(2, {}, kTenRequests);
  leaders.add(leader_plan(300));
  CHECK_FALSE(leaders.excludes(floor_at(100)));  // two plans needed before anything is dropped
  leaders.add(leader_plan(500));
  leaders.add(leader_plan(400));                 // the leaders: 500 and 400 tokens/s
  CHECK(leaders.excludes(floor_at(2.6)));        // at most 384.6 tokens/s
  CHECK_FALSE(leaders.excludes(floor_at(2.5)));  // at most 400: a tie is simulated
  CHECK_FALSE(leaders.excludes(floor_at(2.4)));
  CHECK_FALSE(leaders.excludes(floor_at(0)));    // no floor known
  CHECK_FALSE(ServingLeaders(0, {}, kTenRequests).excludes(floor_at(1e9)));  // top 0: every plan reported
}

TEST_CASE("with SLOs a configuration is dropped when it cannot meet them or serve as many good requests") {
  ServingSlo slo;
  slo.tpot_s = 0.010;
  slo.percentile = 90;
  SECTION("the leader meets the SLOs at 4 good requests a second") {
    ServingLeaders leaders(1, slo, kTenRequests);
    leaders.add(leader_plan(1000, 4.0, true));
    const std::vector<double> fast(10, 0.005), slow(10, 0.020);
    CHECK(leaders.excludes(floor_at(0.1, slow)));       // its p90 floor is over 10 ms: it cannot meet them
    CHECK(leaders.excludes(floor_at(3.0, fast)));       // at most 10 / 3 s = 3.3 good requests a second
    CHECK_FALSE(leaders.excludes(floor_at(2.0, fast)));  // up to 5 a second
    // One request in ten over the limit keeps the p90 floor within it, and 9 over 2 s is 4.5 a second.
    std::vector<double> one_slow = fast;
    one_slow[3] = 0.020;
    CHECK_FALSE(leaders.excludes(floor_at(2.0, one_slow)));
    one_slow[4] = 0.020;  // two: the p90 floor is over the limit
    CHECK(leaders.excludes(floor_at(2.0, one_slow)));
  }
  SECTION("the leader misses them: only a configuration that cannot meet them either, with fewer good requests") {
    ServingLeaders leaders(1, slo, kTenRequests);
    leaders.add(leader_plan(1000, 2.0, false));
    const std::vector<double> fast(10, 0.005), slow(10, 0.020);
    CHECK_FALSE(leaders.excludes(floor_at(100, fast)));  // it may meet them: it would rank first
    CHECK(leaders.excludes(floor_at(100, slow)));        // none good: 0 < 2 a second
    ServingLeaders none_good(1, slo, kTenRequests);
    none_good.add(leader_plan(400, 0.0, false));
    CHECK(none_good.excludes(floor_at(2.6, slow)));        // a tie at 0 good, and at most 384.6 tokens/s
    CHECK_FALSE(none_good.excludes(floor_at(2.4, slow)));  // up to 416.7 tokens/s
  }
}

TEST_CASE("the serving search reports the same plans as when it simulates every configuration") {
  const Model model = model_preset("llama3-8b");
  const Cluster cluster = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  WorkloadSpec w;
  w.prompt = parse_length("uniform:64:2048", "--prompt-tokens");
  w.output = parse_length("uniform:1:300", "--output-tokens");
  w.requests = 80;
  const ServingEngineFor engine_for = same_engine(ServingConfig{});
  for (const double rate : {0.0, 25.0})
    for (const bool with_slo : {false, true}) {
      w.rate_per_s = rate;
      const std::vector<ServingRequest> requests = make_requests(w);
      ServingSlo slo;
      if (with_slo) slo.tpot_s = 0.004, slo.ttft_s = 0.5;
      INFO("rate " << rate << (with_slo ? ", SLOs" : ""));
      const ServingPlanResult all = plan_serving(model, cluster, cost, 16, engine_for, requests, slo, 1000, true, 1);
      const ServingPlanResult top = plan_serving(model, cluster, cost, 16, engine_for, requests, slo, 4, true, 1);
      REQUIRE(top.plans.size() == 4);
      CHECK(top.considered == all.considered);
      CHECK(top.simulated < all.simulated);
      for (size_t i = 0; i < top.plans.size(); ++i) {
        CHECK(top.plans[i].tp == all.plans[i].tp);
        CHECK(top.plans[i].pp == all.plans[i].pp);
        CHECK(top.plans[i].prefill_tp == all.plans[i].prefill_tp);
        CHECK(top.plans[i].prefill_pp == all.plans[i].prefill_pp);
        CHECK(top.plans[i].metrics.output_tokens_per_s == all.plans[i].metrics.output_tokens_per_s);
        CHECK(top.plans[i].goodput_rps == all.plans[i].goodput_rps);
      }
    }
}
