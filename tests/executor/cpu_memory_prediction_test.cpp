// The simulator's activation peak under the CPU backend's accounting against the peak the CPU backend measures:
// the same number, rank by rank, over schedules, recompute levels and tied embeddings.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/runtime.hpp"
#include "executor_test_util.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

struct Peaks {
  std::vector<double> predicted, measured;
};

Peaks peaks(const Model& model, const std::string& schedule, int vpp, const std::vector<int>& split, Recompute recompute,
            const std::vector<Recompute>& stage_recompute = {}) {
  Scenario s;
  s.model = model;
  s.cluster = load_cluster("ideal");
  s.parallel.pp = 2;
  s.parallel.vpp = vpp;
  s.parallel.microbatches = 4;
  s.workload.micro_batch_size = 2;
  s.workload.recompute = recompute;
  s.workload.memory = MemoryAccounting::CpuFloat32;
  s.stage_recompute = stage_recompute;
  s.schedule = schedule;
  s.split = split;
  const Evaluation ev = evaluate(s, AnalyticCostModel());
  std::vector<LayerRange> ranges;
  for (const StageReport& st : ev.stages) ranges.push_back(st.layers);
  CpuBackendConfig config;
  config.micro_batch_size = 2;
  config.recompute = ev.scenario.workload.recompute;
  config.stage_recompute = ev.scenario.stage_recompute;
  CpuBackend backend(model, ranges, config);
  RunOptions options;
  options.timeout_s = 20;
  Peaks p;
  p.measured = run_schedule(ev.schedule, backend, options).activation_peak_bytes;
  for (const RankStats& r : ev.sim.ranks) p.predicted.push_back(r.activation_peak_bytes);
  return p;
}

void check_equal(const Peaks& p) {
  REQUIRE(p.predicted.size() == p.measured.size());
  for (size_t r = 0; r < p.measured.size(); ++r) {
    INFO("rank " << r);
    CHECK(p.measured[r] > 0);
    CHECK(p.predicted[r] == Approx(p.measured[r]).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("predicted activation peaks equal the cpu backend's measured ones") {
  const Model llama = test::tiny_llama(5);
  SECTION("gpipe") { check_equal(peaks(llama, "gpipe", 1, {3, 2}, Recompute::None)); }
  SECTION("1f1b, selective") { check_equal(peaks(llama, "1f1b", 1, {3, 2}, Recompute::Selective)); }
  SECTION("zb-h1: B keeps the output gradients for W") { check_equal(peaks(llama, "zb-h1", 1, {3, 2}, Recompute::None)); }
  SECTION("zb-h1, full") { check_equal(peaks(llama, "zb-h1", 1, {3, 2}, Recompute::Full)); }
  SECTION("interleaved") { check_equal(peaks(llama, "interleaved", 2, {2, 1, 1, 1}, Recompute::None)); }
  SECTION("zb-v, per-stage recompute") {
    check_equal(peaks(llama, "zb-v", 2, {2, 1, 1, 1}, Recompute::PerStage,
                      {Recompute::Full, Recompute::None, Recompute::Selective, Recompute::None}));
  }
  // With every expert on the rank (ep 1) the rows routed are exactly n k.
  SECTION("MoE blocks (router, experts, gated shared expert), zb-h1") {
    check_equal(peaks(test::tiny_moe(5), "zb-h1", 1, {3, 2}, Recompute::None));
  }
  SECTION("MoE blocks with expert biases, 1f1b, selective") {
    check_equal(peaks(test::tiny_moe(5, /*gpt=*/true), "1f1b", 1, {3, 2}, Recompute::Selective));
  }
  SECTION("MoE blocks, zb-h1, full") { check_equal(peaks(test::tiny_moe(5), "zb-h1", 1, {3, 2}, Recompute::Full)); }
  SECTION("gpt, tied embeddings") {
    TransformerConfig c = *test::tiny_gpt(4).transformer;
    c.tied_embeddings = true;
    check_equal(peaks(make_transformer_model("tied-gpt", c), "zb-h1", 1, {2, 2}, Recompute::None));
  }
}
