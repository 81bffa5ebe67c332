// The simulator against the closed forms of the schedules (design/schedules.md), on uniform stages and
// the ideal cluster (communication is free). Per-rank costs F = 1, B = 1.5, W = 0.5 (F + B + W = 3), all
// exact in binary, so the sums are exact too.
#include <catch2/catch.hpp>

#include "sim/pipeline_sim.hpp"
#include "sim_test_util.hpp"

using namespace pw;
using namespace pw::test;

namespace {
constexpr double F = 1.0, B = 1.5, W = 0.5;
}

TEST_CASE("GPipe and 1F1B take (m + p - 1)(F + B + W) with bubble (p - 1)/(m + p - 1)", "[sim][closed-form]") {
  // Fill and drain each take p - 1 slots of one micro-batch's F or BW; in between every rank works.
  // Every rank is busy m (F + B + W), so idle per rank is (p - 1)(F + B + W) and the bubble fraction
  // is (p - 1)/(m + p - 1).
  for (const char* name : {"gpipe", "1f1b"}) {
    for (auto [p, m] : {std::pair{1, 1}, {2, 3}, {4, 4}, {4, 8}, {8, 16}, {3, 2}}) {
      CAPTURE(name, p, m);
      const SimResult r = simulate(sim_input(generated(name, p, m), uniform_costs(p, F, B, W), ideal_cluster()));
      const double step = (m + p - 1) * (F + B + W);
      CHECK(r.step_time_s == Approx(step).epsilon(1e-12));
      CHECK(r.pipeline_time_s == Approx(step).epsilon(1e-12));
      CHECK(r.bubble_fraction == Approx(double(p - 1) / (m + p - 1)).epsilon(1e-12).margin(1e-15));
      REQUIRE(r.ranks.size() == static_cast<size_t>(p));
      for (const RankStats& rs : r.ranks) {
        CHECK(rs.busy_s == Approx(m * (F + B + W)).epsilon(1e-12));
        CHECK(rs.idle_s == Approx((p - 1) * (F + B + W)).epsilon(1e-12).margin(1e-12));
        CHECK(rs.p2p_bytes_sent == 0);
      }
      // Every rank: m F + m BW; every stage boundary: one send and one receive per micro-batch and
      // direction: 4 (p - 1) m comm actions.
      CHECK(r.actions == 2L * m * p + 4L * (p - 1) * m);
    }
  }
}

TEST_CASE("interleaved takes m(F + B + W) + (p - 1)(F + B + W)/v", "[sim][closed-form]") {
  // Each chunk holds 1/v of a rank's layers, so a chunk's costs are F/v, B/v, W/v; the fill and drain
  // shrink to (p - 1) chunk slots (Megatron's bubble (p - 1)/(v m) of the ideal time m(F + B + W)).
  for (auto [p, m, v] : {std::tuple{2, 2, 2}, {4, 8, 2}, {4, 8, 4}, {4, 12, 3}, {8, 16, 2}}) {
    CAPTURE(p, m, v);
    const SimResult r = simulate(sim_input(generated("interleaved", p, m, v),
                                           uniform_costs(p * v, F / v, B / v, W / v), ideal_cluster()));
    const double step = m * (F + B + W) + (p - 1) * (F + B + W) / v;
    CHECK(r.step_time_s == Approx(step).epsilon(1e-12));
    CHECK(r.bubble_fraction == Approx((p - 1) * (F + B + W) / v / step).epsilon(1e-12));
    for (const RankStats& rs : r.ranks) CHECK(rs.busy_s == Approx(m * (F + B + W)).epsilon(1e-12));
  }
}

TEST_CASE("ZB-H1 with F = B = W takes 3 m F + (p - 1) F", "[sim][closed-form]") {
  // The zero-bubble paper's ZB-H1 idle per rank is (p - 1)(F + B - W) = (p - 1) F when F = B = W: the
  // deferred W fill the drain bubble, so the iteration is m(F + B + W) + (p - 1) F. (m > p here: with
  // m = p the generator's rank 0 runs B1 before W0 and waits one slot, e.g. 8 s instead of 7 for p = m = 2.)
  for (auto [p, m] : {std::pair{2, 3}, {2, 4}, {4, 5}, {4, 8}, {8, 9}, {8, 16}}) {
    CAPTURE(p, m);
    const SimResult r = simulate(sim_input(generated("zb-h1", p, m), uniform_costs(p, 1, 1, 1), ideal_cluster()));
    CHECK(r.step_time_s == Approx(3.0 * m + (p - 1)).epsilon(1e-12));
    CHECK(r.bubble_fraction == Approx(double(p - 1) / (3.0 * m + p - 1)).epsilon(1e-12));
  }
}

TEST_CASE("peak in-flight micro-batches: min(p - i, m) on rank i for 1F1B, m for GPipe", "[sim][memory]") {
  // 1F1B rank i runs p - i - 1 warm-up forwards and one more before its first backward, and frees one
  // for each new one after; GPipe holds all m before the first backward. Each held micro-batch keeps
  // activation_bytes, so the activation peak is in-flight x activation_bytes, and the peak memory adds
  // the stage's model state.
  const double act = 1000, state = 7e6;
  for (auto [p, m] : {std::pair{4, 8}, {4, 2}, {8, 8}, {1, 3}}) {
    CAPTURE(p, m);
    auto costs = uniform_costs(p, F, B, W, act);
    for (auto& c : costs) c.model_state_bytes = state;
    const SimResult r1 = simulate(sim_input(generated("1f1b", p, m), costs, ideal_cluster()));
    const SimResult rg = simulate(sim_input(generated("gpipe", p, m), costs, ideal_cluster()));
    for (int i = 0; i < p; ++i) {
      CAPTURE(i);
      const int inflight = std::min(p - i, m);
      CHECK(r1.ranks[i].peak_inflight_microbatches == inflight);
      CHECK(r1.ranks[i].activation_peak_bytes == inflight * act);
      CHECK(r1.ranks[i].model_state_bytes == state);
      CHECK(r1.ranks[i].peak_memory_bytes == state + inflight * act);
      CHECK(rg.ranks[i].peak_inflight_microbatches == m);
      CHECK(rg.ranks[i].activation_peak_bytes == m * act);
    }
  }
}

TEST_CASE("interleaved holds about p + (p - 1)/v micro-batches' worth of activations on rank 0", "[sim][memory]") {
  // Megatron's warm-up on rank 0 is 2(p - 1) + (v - 1) p chunk forwards, plus the one before the first
  // backward: 2(p - 1) + (v - 1) p + 1 chunk activations of A/v each, i.e. (p + (p - 1)/v + 1/v) A for a
  // per-rank activation A (the design note's "about p + (p - 1)/v").
  const int p = 4, m = 8, v = 2;
  const double a = 1024;  // per rank per micro-batch
  const SimResult r = simulate(
      sim_input(generated("interleaved", p, m, v), uniform_costs(p * v, F / v, B / v, W / v, a / v), ideal_cluster()));
  const int chunk_acts = 2 * (p - 1) + (v - 1) * p + 1;
  CHECK(r.ranks[0].peak_inflight_microbatches == chunk_acts);
  CHECK(r.ranks[0].activation_peak_bytes == chunk_acts * a / v);
}
