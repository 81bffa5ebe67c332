// Megatron-Core's precision-aware optimizer: the bytes its state takes per parameter, and what the analytic
// model and measured optimizer times make of them.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/optimizer_precision.hpp"

using namespace pw;

TEST_CASE("precision-aware optimizer state: a 2-byte master remainder and the moments at their widths") {
  OptimizerPrecision op;
  CHECK_FALSE(op.state_bytes());  // off: the cost model's 12 bytes
  op.precision_aware = true;
  CHECK(*op.state_bytes() == 2 + 4 + 4);  // Megatron-LM's defaults: fp32 moments
  op.exp_avg = StateDtype::Bf16;
  op.exp_avg_sq = StateDtype::Bf16;
  CHECK(*op.state_bytes() == 2 + 2 + 2);  // Megatron-Bridge's DeepSeek-V3 recipes
  op.exp_avg = StateDtype::Fp8;
  op.exp_avg_sq = StateDtype::Fp16;
  CHECK(*op.state_bytes() == 2 + 1 + 2);
  // Megatron-LM's choices for --exp-avg-dtype and --exp-avg-sq-dtype (megatron/training/arguments.py).
  for (const char* name : {"fp32", "fp16", "bf16", "fp8"}) CHECK(to_string(*state_dtype_from_string(name)) == std::string(name));
  CHECK_FALSE(state_dtype_from_string("bf8"));
  CHECK_FALSE(state_dtype_from_string("float32"));
}

TEST_CASE("the analytic model keeps and steps a narrower optimizer state") {
  AnalyticCostParams p;
  p.memory_efficiency = 0.5;
  const AnalyticCostModel cost(p);
  const StateWidths bf16_moments{false, 6.0};
  // ZeRO-1 over 8: 2 + 4 + 6 / 8 where the default keeps 2 + 4 + 12 / 8; ZeRO-0 keeps all of it.
  CHECK(cost.model_state_bytes_per_parameter(8, 1, bf16_moments) == 2 + 4 + 6.0 / 8);
  CHECK(cost.model_state_bytes_per_parameter(8, 0, bf16_moments) == 12);
  CHECK(cost.model_state_bytes_per_parameter(8, 1, {true, 10.0}) == 2 + 2 + 10.0 / 8);
  // Adam's 30 bytes a parameter: 6 fewer read and 6 fewer written, the bf16 weight read for its remainder.
  GpuSpec gpu;
  gpu.name = "round";
  gpu.hbm_bytes_per_s = 1e12;
  CHECK(cost.optimizer_step_time(1e9, gpu, {}) == Approx(30e9 / 0.5e12).epsilon(1e-12));
  CHECK(cost.optimizer_step_time(1e9, gpu, bf16_moments) == Approx(20e9 / 0.5e12).epsilon(1e-12));
  CHECK(cost.optimizer_step_time(1e9, gpu, {false, 10.0}) == Approx(28e9 / 0.5e12).epsilon(1e-12));
  // A measured step (the default widths) scales as the model below scales its own: 20 / 30.
  CHECK(measured_optimizer_time(3e-12, 1e9, gpu, {}, cost) == Approx(3e-3).epsilon(1e-12));
  CHECK(measured_optimizer_time(3e-12, 1e9, gpu, bf16_moments, cost) == Approx(2e-3).epsilon(1e-12));
}
