#include <catch2/catch.hpp>

#include <optional>

#include <limits>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"

using namespace pw;

namespace {

// Round numbers so that every expected time below is a short hand calculation.
AnalyticCostParams round_params() {
  AnalyticCostParams p;
  p.gemm_efficiency = 0.5;
  p.attention_efficiency = 0.25;
  p.memory_efficiency = 0.5;
  p.kernel_overhead_s = 1e-6;
  p.collective_efficiency = 0.5;
  p.p2p_efficiency = 0.8;
  p.tp_overlap = 0;
  p.optimizer_bytes_per_parameter = 30;
  p.memory_reserve_bytes = 2e9;
  return p;
}

GpuSpec round_gpu() { return GpuSpec{"test-gpu", 100e12, 80e9, 1e12}; }

const LinkSpec kNvlink{1e11, 1e-5};

PhaseWork forward_work() {
  PhaseWork w;
  w.gemm_flops = 1e12;
  w.attention_flops = 1e11;
  w.memory_bytes = 1e9;
  w.kernels = 10;
  w.collectives = {Collective{CollectiveKind::AllReduce, 1e8}};
  return w;
}

Layer block() { return Layer{"block", LayerKind::Block, std::nullopt}; }

std::string message_of(const AnalyticCostParams& p) {
  try {
    validate(p);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a phase's time is its roofline terms plus launches plus its tp collectives") {
  const AnalyticCostModel cost(round_params());
  LayerWork work;
  work.forward = forward_work();
  // gemm 1e12 / (100e12 x 0.5) = 0.02 s; attention 1e11 / (100e12 x 0.25) = 0.004 s;
  // memory 1e9 / (1e12 x 0.5) = 0.002 s; launches 10 x 1 us = 1e-5 s;
  // all-reduce over tp = 4 at 1e11 x 0.5 B/s: 2 (3/4) 1e8 / 5e10 + 2 x 3 x 1e-5 = 0.003 + 6e-5 s.
  const double expected = 0.02 + 0.004 + 0.002 + 1e-5 + 0.00306;
  CHECK(cost.phase_time(block(), work, Phase::Forward, round_gpu(), kNvlink, 4) == Approx(expected).epsilon(1e-12));
  // The same work without tp has no collective.
  CHECK(cost.phase_time(block(), work, Phase::Forward, round_gpu(), kNvlink, 1) ==
        Approx(0.02 + 0.004 + 0.002 + 1e-5).epsilon(1e-12));
  CHECK(cost.compute_time(work.forward, round_gpu()) == Approx(0.02 + 0.004 + 0.002 + 1e-5).epsilon(1e-12));
}

TEST_CASE("backward-input time includes the recomputed forward, backward-weight is its own work") {
  const AnalyticCostModel cost(round_params());
  LayerWork work;
  work.backward_input.gemm_flops = 2e12;  // 0.04 s
  work.recompute = forward_work();        // 0.02907 s at tp = 4, as above
  work.backward_weight.gemm_flops = 1e12;  // 0.02 s
  CHECK(cost.phase_time(block(), work, Phase::BackwardInput, round_gpu(), kNvlink, 4) ==
        Approx(0.04 + 0.02907).epsilon(1e-12));
  CHECK(cost.phase_time(block(), work, Phase::BackwardWeight, round_gpu(), kNvlink, 4) == Approx(0.02).epsilon(1e-12));
}

TEST_CASE("tp_overlap hides that fraction of the tp collectives") {
  AnalyticCostParams p = round_params();
  p.tp_overlap = 0.5;
  const AnalyticCostModel cost(p);
  LayerWork work;
  work.forward = forward_work();
  // Half of the 0.00306 s all-reduce remains.
  CHECK(cost.phase_time(block(), work, Phase::Forward, round_gpu(), kNvlink, 4) ==
        Approx(0.026 + 1e-5 + 0.00153).epsilon(1e-12));
}

TEST_CASE("explicit layer times are used as given, with nothing added") {
  const AnalyticCostModel cost(round_params());
  LayerWork work;
  work.forward = forward_work();  // ignored: the explicit times win
  work.forward_s = 0.5;
  work.backward_input_s = 0.75;
  work.backward_weight_s = 0.25;
  const Layer layer{"measured", LayerKind::Explicit, ExplicitCosts{0.5, 0.75, 0.25, 0, 0, 0, std::nullopt}};
  CHECK(cost.phase_time(layer, work, Phase::Forward, round_gpu(), kNvlink, 4) == 0.5);
  CHECK(cost.phase_time(layer, work, Phase::BackwardInput, round_gpu(), kNvlink, 4) == 0.75);
  CHECK(cost.phase_time(layer, work, Phase::BackwardWeight, round_gpu(), kNvlink, 4) == 0.25);
  // A layer whose explicit costs have not been copied into its work still reads them from the layer.
  const LayerWork empty;
  CHECK(cost.phase_time(layer, empty, Phase::BackwardInput, round_gpu(), kNvlink, 4) == 0.75);
}

TEST_CASE("ring collectives follow the nccl-tests formulas") {
  const AnalyticCostModel cost(round_params());
  const LinkSpec ib{2.5e10, 5e-6};  // 1.25e10 B/s after collective_efficiency 0.5
  // all-reduce of 1e9 bytes over 8 ranks: 2 (7/8) 1e9 / 1.25e10 + 2 x 7 x 5e-6 = 0.14 + 7e-5 s.
  CHECK(cost.collective_time(CollectiveKind::AllReduce, 1e9, 8, ib) == Approx(0.14007).epsilon(1e-12));
  // reduce-scatter and all-gather are one pass: (7/8) 1e9 / 1.25e10 + 7 x 5e-6 = 0.07 + 3.5e-5 s.
  CHECK(cost.collective_time(CollectiveKind::ReduceScatter, 1e9, 8, ib) == Approx(0.070035).epsilon(1e-12));
  CHECK(cost.collective_time(CollectiveKind::AllGather, 1e9, 8, ib) == Approx(0.070035).epsilon(1e-12));
  // One rank, or nothing to move, costs nothing.
  CHECK(cost.collective_time(CollectiveKind::AllReduce, 1e9, 1, ib) == 0);
  CHECK(cost.collective_time(CollectiveKind::AllReduce, 0, 8, ib) == 0);
  // The ideal cluster's link: infinite bandwidth, no latency -> free.
  const LinkSpec free_link{std::numeric_limits<double>::infinity(), 0};
  CHECK(cost.collective_time(CollectiveKind::AllReduce, 1e9, 8, free_link) == 0);
  CHECK(cost.p2p_link(free_link).bandwidth_bytes_per_s == std::numeric_limits<double>::infinity());
}

TEST_CASE("a link without bandwidth is reported, not divided by") {
  const AnalyticCostModel cost(round_params());
  try {
    cost.collective_time(CollectiveKind::AllReduce, 1e6, 2, LinkSpec{0, 0});
    FAIL("expected BadInput");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) == "cluster: link bandwidth is 0 B/s; give a positive bandwidth");
  }
}

TEST_CASE("p2p links keep their latency and reach p2p_efficiency of their bandwidth") {
  const AnalyticCostModel cost(round_params());
  const LinkSpec l = cost.p2p_link(LinkSpec{5e10, 3e-6});
  CHECK(l.bandwidth_bytes_per_s == Approx(4e10).epsilon(1e-15));  // 5e10 x 0.8
  CHECK(l.latency_s == 3e-6);
}

TEST_CASE("the Adam step is memory-bound") {
  const AnalyticCostModel cost(round_params());
  // 1e9 parameters x 30 bytes / (1e12 x 0.5 B/s) = 0.06 s.
  CHECK(cost.optimizer_step_time(1e9, round_gpu(), {}) == Approx(0.06).epsilon(1e-12));
  CHECK(cost.optimizer_step_time(0, round_gpu(), {}) == 0);
}

TEST_CASE("model state is 18 bytes per parameter, 6 + 12/dp with the distributed optimizer") {
  const AnalyticCostModel cost;
  CHECK(cost.model_state_bytes_per_parameter(8, 0, {}) == 18);
  CHECK(cost.model_state_bytes_per_parameter(1, 1, {}) == 18);
  CHECK(cost.model_state_bytes_per_parameter(8, 1, {}) == 7.5);   // 6 + 12/8
  CHECK(cost.model_state_bytes_per_parameter(64, 1, {}) == 6.1875);  // 6 + 12/64
}

TEST_CASE("the memory reserve is a parameter the cost model reports") {
  const AnalyticCostModel cost(round_params());
  CHECK(cost.memory_reserve_bytes() == 2e9);
  const CostModel& base = cost;
  CHECK(base.memory_reserve_bytes() == 2e9);
  CHECK(AnalyticCostModel().name() == "analytic");
}

TEST_CASE("the defaults are physically sensible and pass validation") {
  const AnalyticCostParams d;
  CHECK_NOTHROW(validate(d));
  CHECK(d.gemm_efficiency >= 0.6);
  CHECK(d.gemm_efficiency <= 0.8);
  CHECK(d.attention_efficiency < d.gemm_efficiency);
  CHECK(d.collective_efficiency <= 0.9);
  CHECK(d.memory_reserve_bytes > 0);
}

TEST_CASE("parameters out of range are rejected naming the field") {
  AnalyticCostParams p;
  p.gemm_efficiency = 1.5;
  CHECK(message_of(p) == "cost model: gemm_efficiency = 1.5 is not in (0, 1]; give a fraction of peak such as 0.7");
  p = AnalyticCostParams{};
  p.tp_overlap = -0.1;
  CHECK(message_of(p) == "cost model: tp_overlap = -0.1 is not in [0, 1]; give the hidden fraction of tp collectives");
  p = AnalyticCostParams{};
  p.memory_reserve_bytes = -1;
  CHECK(message_of(p) == "cost model: memory_reserve_bytes = -1 is negative or not finite; give a value >= 0");
  CHECK_THROWS_AS(AnalyticCostModel(p), Error);
}

TEST_CASE("a GPU without a peak cannot run FLOPs") {
  const AnalyticCostModel cost(round_params());
  PhaseWork w;
  w.gemm_flops = 1;
  try {
    cost.compute_time(w, GpuSpec{"blank", 0, 0, 1e12});
    FAIL("expected BadInput");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "gpu blank: peak_flops is 0; give a positive value in the cluster's gpu");
  }
}

TEST_CASE("cost parameters are set by name, and unknown names or malformed text are refused") {
  AnalyticCostParams p;
  set_param(p, "gemm_efficiency=0.65");
  CHECK(p.gemm_efficiency == 0.65);
  set_param(p, "memory_reserve_bytes", 2e9);
  CHECK(p.memory_reserve_bytes == 2e9);
  try {
    set_param(p, "gemm=0.5");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "--cost-param: unknown parameter 'gemm'; known: gemm_efficiency, fp8_gemm_efficiency, attention_efficiency, memory_efficiency, "
          "kernel_overhead_s, collective_efficiency, p2p_efficiency, tp_overlap, optimizer_bytes_per_parameter, "
          "weight_bytes_per_parameter, grad_bytes_per_parameter, optimizer_state_bytes_per_parameter, "
          "memory_reserve_bytes, fb_overlap, moe_load_imbalance, all_to_all_sm_share, moe_host_s");
  }
  for (const char* bad : {"gemm_efficiency", "gemm_efficiency=", "=0.5", "gemm_efficiency=0.5x"}) {
    try {
      set_param(p, bad);
      FAIL("no error for " << bad);
    } catch (const Error& e) {
      CHECK(std::string(e.what()) == fmt::format("--cost-param: '{}' is not NAME=VALUE; for example gemm_efficiency=0.65", bad));
    }
  }
}
