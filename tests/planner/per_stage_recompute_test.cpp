// Per-stage recompute: the partitioner gives each stage the lightest recompute level that fits its GPU,
// and its split is the best over every split and every assignment of levels, by bottleneck and by
// simulated step time, as brute force finds them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "planner/partitioner.hpp"
#include "planner/search.hpp"
#include "partition_test_util.hpp"

using namespace pw;
using test::for_each_split;

namespace {

// A GPT-3 1.3B-wide model with 6 blocks: 8 layers, few enough to enumerate every split and level.
Model mini_gpt() {
  return model_from_json_text(R"({"name": "mini-gpt", "transformer": {"family": "gpt", "hidden": 2048, "layers": 6,
      "heads": 16, "ffn": 8192, "vocab": 50257, "seq_len": 2048, "mlp": "gelu", "norm": "layernorm",
      "learned_positions": true, "bias": true}})",
                              "mini-gpt");
}

Scenario scenario(int pp, double memory_bytes) {
  Scenario s;
  s.model = mini_gpt();
  s.cluster = test::exact_cluster(memory_bytes);
  s.parallel.pp = pp;
  s.parallel.microbatches = 8;
  s.workload.micro_batch_size = 2;
  // The stored s x s scores make the levels differ enough in memory for every level to be chosen somewhere.
  s.workload.flash_attention = false;
  s.schedule = "1f1b";
  return s;
}

// The bottleneck as the partitioner defines it, from what evaluate() reports: a stage's F + B + W and,
// but for the last, its output's way there and its gradient's way back (latency + bytes / bandwidth).
double bottleneck(const Evaluation& ev) {
  double worst = 0;
  const size_t n = ev.stages.size();
  for (size_t s = 0; s < n; ++s) {
    const StageCost& c = ev.stages[s].cost;
    double t = c.forward_s + c.backward_input_s + c.backward_weight_s;
    if (s + 1 < n) t += 2 * (test::kLatency + c.output_bytes / test::kBandwidth);
    worst = std::max(worst, t);
  }
  return worst;
}

// A limit between the last and the first rank's peak without recompute: the first rank holds pp
// micro-batches in flight, the last one; with it, early stages need recompute and late ones do not.
double binding_limit(int pp) {
  Scenario s = scenario(pp, 1e15);
  const Evaluation ev = evaluate(s, test::exact_cost());
  const double first = ev.sim.ranks.front().peak_memory_bytes, last = ev.sim.ranks.back().peak_memory_bytes;
  REQUIRE(first > last);
  return (first + last) / 2;
}

}  // namespace

TEST_CASE("per-stage recompute: the partitioner's split and levels equal brute force over splits and levels",
          "[planner][recompute]") {
  const AnalyticCostModel cost = test::exact_cost();
  for (int pp : {3, 4}) {
    CAPTURE(pp);
    const double limit = binding_limit(pp);
    Scenario s = scenario(pp, limit);
    s.workload.recompute = Recompute::PerStage;
    const int n = s.model.num_layers();

    // Brute force: every split, every level per stage; the fitting ones' best bottleneck, then the best
    // simulated step among the splits and levels that reach it.
    const std::vector<Recompute> levels{Recompute::None, Recompute::Selective, Recompute::Full};
    struct Found {
      double bottleneck, step;
    };
    std::vector<Found> feasible;
    for_each_split(n, pp, [&](const std::vector<LayerRange>& ranges) {
      std::vector<Recompute> assign(static_cast<size_t>(pp), Recompute::None);
      std::function<void(size_t)> pick = [&](size_t st) {
        if (st == assign.size()) {
          Scenario t = s;
          t.ranges = ranges;
          t.stage_recompute = assign;
          const Evaluation ev = evaluate(t, cost);
          if (ev.metrics.overflows.empty()) feasible.push_back(Found{bottleneck(ev), ev.metrics.step_time_s});
          return;
        }
        for (Recompute r : levels) {
          assign[st] = r;
          pick(st + 1);
        }
      };
      pick(0);
    });
    REQUIRE(!feasible.empty());
    double best_bottleneck = std::numeric_limits<double>::infinity();
    for (const Found& f : feasible) best_bottleneck = std::min(best_bottleneck, f.bottleneck);
    double best_step = std::numeric_limits<double>::infinity();
    for (const Found& f : feasible)
      if (f.bottleneck <= best_bottleneck * (1 + 1e-9)) best_step = std::min(best_step, f.step);

    double fastest = std::numeric_limits<double>::infinity();
    for (const Found& f : feasible) fastest = std::min(fastest, f.step);

    PartitionOptions po;
    po.max_ties = 1000;  // every bottleneck-optimal split is simulated
    po.fastest = false;
    const PartitionResult tied = best_partition(resolve(s), cost, po);
    CHECK(tied.bottleneck_s == Approx(best_bottleneck).epsilon(1e-9));
    CHECK(tied.step_time_s == Approx(best_step).epsilon(1e-9));

    // The default searches every split: the fastest of all splits and levels, here faster than any
    // bottleneck-optimal one.
    const PartitionResult r = best_partition(resolve(s), cost);
    REQUIRE(r.stage_recompute.size() == static_cast<size_t>(pp));
    CHECK(r.min_bottleneck_s == Approx(best_bottleneck).epsilon(1e-9));
    CHECK(r.step_time_s == Approx(fastest).epsilon(1e-9));
    CHECK(r.fastest_proven);
    CHECK(r.step_time_s < tied.step_time_s);

    // What the partitioner chose fits, mixes levels (some stages recompute, some do not), and no stage
    // could take a lighter level: one step lighter overflows that stage's rank.
    Scenario chosen = s;
    chosen.ranges = r.ranges;
    chosen.stage_recompute = r.stage_recompute;
    const Evaluation ev = evaluate(chosen, cost);
    CHECK(ev.metrics.overflows.empty());
    CHECK(ev.metrics.step_time_s == Approx(r.step_time_s).epsilon(1e-12));
    const auto none = std::count(r.stage_recompute.begin(), r.stage_recompute.end(), Recompute::None);
    CHECK(none > 0);
    CHECK(none < pp);
    for (int st = 0; st < pp; ++st) {
      const Recompute level = r.stage_recompute[static_cast<size_t>(st)];
      if (level == Recompute::None) continue;
      Scenario lighter = chosen;
      lighter.stage_recompute[static_cast<size_t>(st)] = level == Recompute::Full ? Recompute::Selective : Recompute::None;
      const Evaluation over = evaluate(lighter, cost);
      bool overflows = false;
      for (const Overflow& o : over.metrics.overflows) overflows = overflows || o.rank == st;
      CHECK(overflows);
    }
    CHECK(stage_recompute_for(resolve(s), cost, r.ranges) == r.stage_recompute);

    // Uniform full recompute also fits, but pays the recompute on every stage.
    Scenario full = s;
    full.workload.recompute = Recompute::Full;
    const PartitionResult uniform = best_partition(resolve(full), cost, po);
    CHECK(r.step_time_s < uniform.step_time_s);
  }
}

TEST_CASE("per-stage recompute: the search picks it where memory binds and equals exhaustive scoring",
          "[planner][recompute][search]") {
  const AnalyticCostModel cost = test::exact_cost();
  Scenario base = scenario(3, binding_limit(3));
  base.global_batch_size = 16;
  base.parallel = ParallelConfig{};
  SearchSpace space;
  space.gpus = 3;
  space.pp = 3;
  space.micro_batch_size = 2;
  space.schedules = {"1f1b", "gpipe", "interleaved"};
  SearchOptions pruned;
  pruned.top = 3;
  pruned.threads = 2;
  SearchOptions exhaustive = pruned;
  exhaustive.prune = false;
  const SearchResult a = search_plans(base, space, cost, pruned);
  const SearchResult b = search_plans(base, space, cost, exhaustive);
  REQUIRE(a.plans.size() == b.plans.size());
  for (size_t i = 0; i < a.plans.size(); ++i) {
    CHECK(a.plans[i].config == b.plans[i].config);
    CHECK(a.plans[i].evaluation.metrics.step_time_s == b.plans[i].evaluation.metrics.step_time_s);
  }
  CHECK(a.plans.front().config.recompute == Recompute::PerStage);
  CHECK(a.plans.front().config.schedule != "interleaved");  // per-stage levels need one chunk per rank

  space.recomputes = {Recompute::None, Recompute::Selective, Recompute::Full};
  const SearchResult uniform = search_plans(base, space, cost, pruned);
  CHECK(a.plans.front().evaluation.metrics.step_time_s < uniform.plans.front().evaluation.metrics.step_time_s);
}

TEST_CASE("per-stage recompute: bad levels and schedules are refused with the fix", "[planner][recompute]") {
  const AnalyticCostModel cost = test::exact_cost();
  Scenario s = scenario(3, 1e15);
  s.stage_recompute = {Recompute::Full, Recompute::None};
  CHECK_THROWS_WITH(evaluate(s, cost),
                    "--stage-recompute: 2 levels for 3 stages; give one level per stage (none, selective or full)");
  s.stage_recompute.clear();
  s.workload.recompute = Recompute::PerStage;
  CHECK_THROWS_WITH(evaluate(s, cost),
                    "--recompute per-stage: give each stage's level with --stage-recompute (pipewright plan chooses them)");
  s.schedule = "interleaved";
  s.parallel.vpp = 2;
  s.parallel.microbatches = 6;
  CHECK_THROWS_WITH(best_partition(resolve(s), cost),
                    "--recompute per-stage: schedule 'interleaved' puts 2 chunks on a rank, whose memory the chunks "
                    "share; use a schedule with one chunk per rank or one recompute level");
}
