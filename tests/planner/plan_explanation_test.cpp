// `plan --explain`: the step breakdown against closed forms and the simulator, and the runner-up lines.
#include <catch2/catch.hpp>

#include <numeric>

#include "core/analytic_cost_model.hpp"
#include "partition_test_util.hpp"
#include "planner/plan_explanation.hpp"
#include "planner/search.hpp"
#include "small_cluster.hpp"

using namespace pw;
using namespace pw::test;

namespace {

double sum_of(const StepBreakdown& b) {
  double s = 0;
  for (const Loss& l : parts_of(b)) s += l.seconds;
  return s;
}

// n identical layers of F = 1/8, B = 3/16, W = 1/16 s (T = F + B + W = 3/8 s per layer), `out` bytes each.
Model uniform_model(int n, double out) {
  Model m;
  m.name = "uniform";
  for (int i = 0; i < n; ++i) m.layers.push_back(explicit_layer(fmt::format("l{}", i), 0.125, 0.1875, 0.0625, out, 1024, 0));
  return m;
}

// GPT-3 1.3B on the small cluster's 8 GPUs, 32 sequences of 1024 tokens: the `top` best plans.
SearchResult small_search(const CostModel& cost, const std::vector<std::string>& schedules, int top) {
  Scenario base;
  base.model = model_preset("gpt3-1.3b");
  base.cluster = small_cluster();
  base.global_batch_size = 32;
  base.workload.seq_len = 1024;
  SearchSpace space;
  space.gpus = 8;
  space.schedules = schedules;
  SearchOptions o;
  o.top = top;
  return search_plans(base, space, cost, o);
}

}  // namespace

TEST_CASE("1F1B on free links: compute m T and bubble (p - 1) T on the busiest rank, nothing else") {
  const AnalyticCostModel cost = exact_cost();
  for (auto [p, m] : {std::pair{2, 1}, {4, 8}, {3, 5}}) {
    CAPTURE(p, m);
    Cluster ideal;
    ideal.name = "ideal";
    ideal.ideal = true;
    Scenario s = scenario_for(uniform_model(p, 0), ideal, "1f1b", p, 1, m);
    const Evaluation ev = evaluate(s, cost);
    const StepBreakdown b = break_down(ev, cost);
    const double T = 0.375;
    CHECK(b.step_s == (m + p - 1) * T);
    CHECK(b.compute_s == m * T);
    CHECK(b.bubble_s == (p - 1) * T);
    CHECK(b.pp_s == 0);
    CHECK(b.tp_s == 0);
    CHECK(b.recompute_s == 0);
    CHECK(b.dp_s == 0);
    CHECK(b.optimizer_s == 0);
    CHECK(sum_of(b) == b.step_s);
  }
}

TEST_CASE("two stages, one micro-batch: the transfers are the activation and its gradient, each latency + bytes / bandwidth") {
  // Rank 0: F, then waits for the gradient; rank 1: F after the activation arrives, then BW. Step 2T + 2x.
  const AnalyticCostModel cost = exact_cost();
  const double bytes = 1 << 20;
  const double x = kLatency + bytes / kBandwidth;
  Scenario s = scenario_for(uniform_model(2, bytes), exact_cluster(1e18), "1f1b", 2, 1, 1);
  const Evaluation ev = evaluate(s, cost);
  const StepBreakdown b = break_down(ev, cost);
  const double T = 0.375;
  CHECK(b.step_s == 2 * T + 2 * x);
  CHECK(b.compute_s == T);
  CHECK(b.pp_s == Approx(2 * x).epsilon(1e-12));
  CHECK(b.bubble_s == Approx(T).epsilon(1e-12));
  CHECK(sum_of(b) == Approx(b.step_s).epsilon(1e-12));
}

TEST_CASE("on searched plans the parts sum to the step, tp and recompute match the simulator's busy time") {
  const AnalyticCostModel cost;
  const SearchResult r = small_search(cost, {"1f1b", "interleaved", "zb-h1"}, 6);
  int compared = 0;
  for (const Plan& plan : r.plans) {
    const Evaluation& ev = plan.evaluation;
    INFO(describe(plan.config));
    const StepBreakdown b = break_down(ev, cost);
    CHECK(sum_of(b) == Approx(b.step_s).epsilon(1e-12));
    for (const Loss& l : parts_of(b)) CHECK(l.seconds >= 0);
    CHECK((b.tp_s > 0) == (plan.config.tp > 1));

    // The same split with recompute off (or full when it was off): the busiest rank's busy time moves by
    // the recompute part exactly.
    Scenario other = ev.scenario;
    for (const StageReport& st : ev.stages) other.ranges.push_back(st.layers);
    other.ranges.resize(ev.stages.size());
    other.stage_recompute.clear();
    other.workload.recompute = plan.config.recompute == Recompute::None ? Recompute::Full : Recompute::None;
    const Evaluation flipped = evaluate(other, cost);
    const double busy = ev.sim.ranks[static_cast<size_t>(b.rank)].busy_s;
    const double flipped_busy = flipped.sim.ranks[static_cast<size_t>(b.rank)].busy_s;
    const StepBreakdown fb = break_down(flipped, cost);
    if (fb.rank != b.rank) continue;
    ++compared;
    CHECK(std::fabs(busy - flipped_busy) == Approx(std::fabs(b.recompute_s - fb.recompute_s)).epsilon(1e-9));
    CHECK(std::fabs(b.recompute_s - fb.recompute_s) > 0);
  }
  CHECK(compared > 0);
}

TEST_CASE("runners-up name what differs and lose exactly their step difference") {
  const AnalyticCostModel cost;
  const SearchResult r = small_search(cost, {"1f1b", "interleaved"}, 4);
  REQUIRE(r.plans.size() == 4);
  const PlanExplanation e = explain_plans(r.plans, cost);
  REQUIRE(e.runners_up.size() == 3);
  REQUIRE(!e.binding.empty());
  for (const RunnerUp& u : e.runners_up) {
    const Plan& p = r.plans[static_cast<size_t>(u.rank - 1)];
    CHECK(u.loss_s == p.evaluation.metrics.step_time_s - r.plans.front().evaluation.metrics.step_time_s);
    CHECK(u.loss_s >= 0);
    CHECK(u.differs == describe_difference(p.config, r.plans.front().config));
    CHECK(u.line.rfind(fmt::format("#{} +", u.rank), 0) == 0);
  }
  Candidate a = r.plans.front().config, b = a;
  b.tp = a.tp * 2;
  b.order = a.order == RankOrder::TpPpDp ? RankOrder::TpDpPp : RankOrder::TpPpDp;
  CHECK(describe_difference(b, a) == fmt::format("tp={} (not {}), rank order {} (not {})", b.tp, a.tp, to_string(b.order),
                                                 to_string(a.order)));
  CHECK(describe_difference(a, a) == "the same configuration");
}

TEST_CASE("a host-bound MoE run: the breakdown's host part is the simulator's wait on the host, and binds") {
  // Qwen3-30B-A3B on 16 H100s at ep 16, one stage: its blocks wait on the host (docs/validation.md).
  Scenario s;
  s.model = model_preset("qwen3-30b-a3b");
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.dp = 16;
  s.parallel.ep = 16;
  s.parallel.order = RankOrder::TpDpPp;
  s.workload.seq_len = 4096;
  s.workload.precision = Precision::Fp8;
  s.workload.dispatcher = Workload::Dispatcher::Flex;
  s.global_batch_size = 1024;
  AnalyticCostParams slow_host;
  slow_host.moe_host_s = 20e-3;  // well above the blocks' GPU time, so that the host binds
  const AnalyticCostModel cost(slow_host);
  const Evaluation ev = evaluate(s, cost);
  const StepBreakdown b = break_down(ev, cost);
  REQUIRE(ev.metrics.host_wait_s > 0);
  CHECK(b.host_s == Approx(ev.metrics.host_wait_s));
  CHECK(sum_of(b) == Approx(b.step_s));
  for (const Loss& l : parts_of(b)) CHECK(l.seconds >= 0);
  Plan plan;
  plan.evaluation = ev;
  const PlanExplanation e = explain_plans({plan}, cost);
  REQUIRE(!e.binding.empty());
  CHECK(e.binding.front().starts_with("the host: it issues the MoE blocks slower than the GPU runs them, "));
  // Without the floor, no part is the host's.
  const AnalyticCostModel gpu_only(executor_cost_params());
  CHECK(break_down(evaluate(s, gpu_only), gpu_only).host_s == 0);
}
