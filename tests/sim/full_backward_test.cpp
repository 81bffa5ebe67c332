// A full backward (BW) priced at what one backward pass was measured to take, where B and W run apart cost
// more (PyTorch's split backward makes two autograd passes); B and W apart are unchanged.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <optional>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

// Two layers of F 4 ms, B 3 ms, W 2 ms, and one backward pass of `one_pass` where measured.
Scenario two_layers(std::optional<double> one_pass, const std::string& schedule, int pp, int m) {
  Scenario s;
  s.model.name = "two";
  for (int i = 0; i < 2 * pp; ++i) {
    ExplicitCosts c{0.004, 0.003, 0.002, 0, 0, 0, std::nullopt};
    c.backward_s = one_pass;
    s.model.layers.push_back(Layer{fmt::format("l{}", i), LayerKind::Explicit, c});
  }
  s.cluster = cluster_preset("ideal");
  s.parallel.pp = pp;
  s.parallel.microbatches = m;
  s.schedule = schedule;
  return s;
}

double step_s(const Scenario& s) {
  const AnalyticCostModel cost;
  return evaluate(s, cost).metrics.step_time_s;
}

}  // namespace

TEST_CASE("a measured one-pass backward is what BW costs, and B and W apart stay as measured") {
  const AnalyticCostModel cost;
  // One stage of two layers: F 8 ms; B 6 + W 4 = 10 ms apart, 2 x 4 = 8 ms as one pass.
  const Scenario one = two_layers(0.004, "1f1b", 1, 4);
  const std::vector<StageCost> c = stage_costs(one.model, {LayerRange{0, 1}}, Workload{}, one.parallel, one.cluster, cost, {0});
  CHECK(c[0].backward_input_s == Approx(0.006));
  CHECK(c[0].backward_weight_s == Approx(0.004));
  CHECK(c[0].full_backward_saving_s == Approx(0.002));
  CHECK(c[0].full_backward_s() == Approx(0.008));
  // 1F1B on one stage runs F, BW four times: 4 x (8 + 8) = 64 ms; B + W apart would make it 4 x 18.
  CHECK(step_s(one) == Approx(0.064).epsilon(1e-12));
  CHECK(step_s(two_layers(std::nullopt, "1f1b", 1, 4)) == Approx(0.072).epsilon(1e-12));
  // A one pass slower than B + W saves nothing (B and W are what the runtime would run).
  CHECK(step_s(two_layers(0.006, "1f1b", 1, 4)) == Approx(0.072).epsilon(1e-12));
  // Zero-bubble schedules run B and W apart: the one pass does not change them.
  CHECK(step_s(two_layers(0.004, "zb-h1", 2, 8)) == step_s(two_layers(std::nullopt, "zb-h1", 2, 8)));
  // GPipe at pp 2, 4 micro-batches, one stage of two layers a rank: (m + p - 1) (F + BW) = 5 x 16 ms.
  CHECK(step_s(two_layers(0.004, "gpipe", 2, 4)) == Approx(0.080).epsilon(1e-12));
}
