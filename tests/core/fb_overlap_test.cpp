// DualPipe's F&B composite: its cost is a cost-model parameter, not F + B + W.
#include <catch2/catch.hpp>

#include <optional>

#include <fmt/format.h>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/stage_costs.hpp"

using namespace pw;

namespace {

Model explicit_model() {
  Model m;
  m.name = "two";
  for (int i = 0; i < 2; ++i) {
    Layer l;
    l.name = fmt::format("l{}", i);
    l.kind = LayerKind::Explicit;
    l.explicit_costs = ExplicitCosts{0.004, 0.003, 0.002, 0, 0, 0, std::nullopt};
    m.layers.push_back(l);
  }
  return m;
}

}  // namespace

TEST_CASE("an F&B composite hides fb_overlap of its shorter half") {
  // Stage of two layers: F = 8 ms, B + W = 6 + 4 = 10 ms. fb_overlap 0.5 hides half of min(F, B+W) = 4 ms:
  // F&B = 18 - 4 = 14 ms. With the default 0 the stage cost says 0 ("not measured") and the simulator
  // charges F + B + W.
  const Model m = explicit_model();
  ParallelConfig pc;
  pc.pp = 1;
  const Cluster c = cluster_preset("ideal");
  AnalyticCostParams params;
  const AnalyticCostModel none(params);
  CHECK(stage_costs(m, {LayerRange{0, 1}}, Workload{}, pc, c, none, {0})[0].overlapped_fb_s == 0);
  set_param(params, "fb_overlap=0.5");
  const AnalyticCostModel half(params);
  CHECK(stage_costs(m, {LayerRange{0, 1}}, Workload{}, pc, c, half, {0})[0].overlapped_fb_s == Approx(0.014));
  set_param(params, "fb_overlap=1.5");
  try {
    AnalyticCostModel bad(params);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "cost model: fb_overlap = 1.5 is not in [0, 1]; give the hidden fraction of the shorter half of an F&B");
  }
}
