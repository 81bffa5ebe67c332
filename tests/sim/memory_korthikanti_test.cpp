// First-stage activation memory from the simulated alloc/free events, checked against
// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models").
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

Scenario gpt3_scenario(const std::string& schedule, int pp, int vpp, int microbatches, int tp) {
  Scenario s;
  s.model = model_preset("gpt3-175b");
  s.cluster = cluster_preset("ideal");
  s.parallel.tp = tp;
  s.parallel.pp = pp;
  s.parallel.vpp = vpp;
  s.parallel.microbatches = microbatches;
  s.workload.micro_batch_size = 1;
  s.workload.seq_len = 2048;
  s.workload.sequence_parallel = true;
  s.workload.recompute = Recompute::None;
  s.workload.flash_attention = false;  // Korthikanti's accounting stores the s x s scores
  s.schedule = schedule;
  const int stages = pp * vpp;
  s.split.assign(static_cast<size_t>(stages), 96 / stages);
  return s;
}

}  // namespace

TEST_CASE("1F1B first stage holds L layers' activations (Korthikanti eq. 5 + embedding dropout)") {
  // s = 2048, b = 1, h = 12288, a = 96, L = 96, t = 8 with sequence parallelism, p = 8, m = 16.
  // Per layer: s b h (34/t + 5 a s / (h t)) bytes. Under 1F1B rank 0 holds p micro-batches of its L/p layers,
  // i.e. L layers' worth: s b h L / t (34 + 5 a s / h), plus p embedding dropout masks of s b h / t bytes.
  const double s = 2048, b = 1, h = 12288, a = 96, L = 96, t = 8, p = 8;
  const double per_layer = s * b * h * (34.0 / t + 5.0 * a * s / (h * t));
  const double expected = L * per_layer + p * s * b * h / t;
  const AnalyticCostModel cost;
  const Evaluation ev = evaluate(gpt3_scenario("1f1b", 8, 1, 16, 8), cost);
  CHECK(ev.sim.ranks[0].peak_inflight_microbatches == 8);
  CHECK(ev.sim.ranks[0].activation_peak_bytes == Approx(expected).epsilon(1e-12));
  // 358,612,992 bytes per layer: 34.45 GB for the first stage.
  CHECK(expected == 34452013056.0);
}

TEST_CASE("interleaved first stage holds L (1 + (p-1)/(p v)) layers' activations (Korthikanti sec. 4.2.3)") {
  // p = 8, v = 2, m = 16, group size p. Rank 0 warms up with 2(p-1) + (v-1)p = 22 forwards and runs one more
  // before its first backward: p v + p - 1 = 23 chunk micro-batches in flight, each of L/(p v) = 6 layers, so
  // 138 layers = L (1 + (p-1)/(p v)) = 96 x 23/16. The embedding lives on chunk 0: the peak comes at the 24th
  // forward (chunk 0, micro-batch 15) right after the first backward freed chunk 1's micro-batch 0, when 16
  // chunk-0 micro-batches hold their embedding dropout mask.
  const double s = 2048, b = 1, h = 12288, a = 96, L = 96, t = 8, p = 8, v = 2;
  const double per_layer = s * b * h * (34.0 / t + 5.0 * a * s / (h * t));
  const double expected = L * (1 + (p - 1) / (p * v)) * per_layer + 16 * s * b * h / t;
  const AnalyticCostModel cost;
  const Evaluation ev = evaluate(gpt3_scenario("interleaved", 8, 2, 16, 8), cost);
  CHECK(ev.sim.ranks[0].peak_inflight_microbatches == 23);
  CHECK(ev.sim.ranks[0].activation_peak_bytes == Approx(expected).epsilon(1e-12));
}
