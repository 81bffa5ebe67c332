// The search's bounds stay below the simulated step where one backward pass costs less than B and W apart
// (CostModel::full_backward_saving): a BW is cheaper than the B + W the bounds would otherwise assume.
#include <catch2/catch.hpp>

#include <optional>

#include <fmt/format.h>

#include <random>

#include "core/analytic_cost_model.hpp"
#include "planner/search_bounds.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

// A runtime that spends 0.3 ms on each compute call, a full backward being one call (a profile's measured
// torch.distributed.pipelining): F, B and W each pay it, BW once.
class OneCallRuntime : public CostModelOver {
 public:
  using CostModelOver::CostModelOver;
  std::string name() const override { return "one-call runtime"; }
  double action_overhead_s() const override { return 3e-4; }
  bool full_backward_one_action() const override { return true; }
};

}  // namespace

TEST_CASE("the step bounds hold where a one-pass backward saves over B and W apart") {
  const AnalyticCostModel analytic;
  const OneCallRuntime runtime(analytic);
  const bool per_call = GENERATE(false, true);
  const CostModel& cost = per_call ? static_cast<const CostModel&>(runtime) : analytic;
  std::mt19937 random(7);
  std::uniform_real_distribution<double> ms(0.5e-3, 4e-3), share(0.3, 1.0);
  int checked = 0;
  for (int trial = 0; trial < 6; ++trial) {
    Model model;
    model.name = "measured";
    for (int i = 0; i < 8; ++i) {
      ExplicitCosts c{ms(random), ms(random), ms(random), 1e6, 1e6, 0, std::nullopt};
      // One pass between the larger of B and W and their sum: what one autograd pass can save.
      c.backward_s = std::max(c.backward_input_s, c.backward_weight_s) +
                     share(random) * std::min(c.backward_input_s, c.backward_weight_s);
      model.layers.push_back(Layer{fmt::format("l{}", i), LayerKind::Explicit, c});
    }
    for (const auto& [schedule, pp, vpp] : std::vector<std::tuple<std::string, int, int>>{
             {"gpipe", 2, 1}, {"1f1b", 4, 1}, {"interleaved", 2, 2}, {"zb-h1", 4, 1}, {"dualpipev", 2, 1},
             {"interleaved-overlap", 2, 2}, {"bfs", 2, 2}}) {
      Scenario s;
      s.model = model;
      s.cluster = cluster_preset("ideal");
      s.schedule = schedule;
      s.parallel.pp = pp;
      s.parallel.vpp = vpp;
      s.parallel.microbatches = 8;
      const Scenario r = resolve(s);
      const Evaluation ev = evaluate(r, cost);
      std::vector<StageCost> costs;
      for (const StageReport& st : ev.stages) costs.push_back(st.cost);
      std::vector<int> rank_gpu;
      for (int k = 0; k < pp; ++k) rank_gpu.push_back(pipeline_rank_gpu(r.parallel, k));
      const LayerTable t = make_layer_table(r.model, r.workload, 1, r.cluster, cost, {0});
      const double step = ev.metrics.step_time_s;
      INFO(schedule << " pp " << pp << " trial " << trial << (per_call ? ", 0.3 ms a call" : ""));
      CHECK(step_time_bound(t, pp, ev.schedule.num_stages() / pp, 8, ev.schedule.copies) <= step * (1 + 1e-9));
      CHECK(step_time_bound(ev.schedule, costs, rank_gpu, r.cluster, cost) <= step * (1 + 1e-9));
      CHECK(rank_path_bound(ev.schedule, costs) <= step * (1 + 1e-9));
      ++checked;
    }
  }
  CHECK(checked == 42);
}
