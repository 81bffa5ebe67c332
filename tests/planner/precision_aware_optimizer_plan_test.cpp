// The precision-aware optimizer in plan files and exports: Megatron-LM's --use-precision-aware-optimizer,
// --exp-avg-dtype and --exp-avg-sq-dtype (megatron/training/arguments.py; the distributed optimizer it needs,
// megatron/core/optimizer/__init__.py; Megatron-LM d98e8a6, August 2026); torchtitan and DeepSpeed refuse it.
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "planned.hpp"
#include "../error_text.hpp"
#include "core/analytic_cost_model.hpp"
#include "exports/megatron.hpp"
#include "exports/exports.hpp"
#include "planner/plan_file.hpp"

using namespace pw;

namespace {

Scenario llama(int dp) {
  Scenario s;
  s.model = model_preset("llama3-8b");
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.pp = 2;
  s.parallel.dp = dp;
  s.parallel.order = RankOrder::TpDpPp;
  s.global_batch_size = 16;
  s.parallel.optimizer_precision.precision_aware = true;
  s.parallel.optimizer_precision.exp_avg = StateDtype::Bf16;
  s.parallel.optimizer_precision.exp_avg_sq = StateDtype::Fp16;
  return s;
}

long count(const std::vector<std::string>& a, const std::string& flag) { return std::count(a.begin(), a.end(), flag); }

std::string after(const std::vector<std::string>& a, const std::string& flag) {
  const auto it = std::find(a.begin(), a.end(), flag);
  return it == a.end() || it + 1 == a.end() ? "absent" : *(it + 1);
}

}  // namespace

TEST_CASE("Megatron-LM: the precision-aware optimizer, its moments' dtypes and the distributed optimizer it needs") {
  for (int dp : {1, 4}) {
    INFO("dp " << dp);
    const std::vector<std::string> a = megatron_arguments(test::planned(llama(dp), {16, 16}));
    CHECK(count(a, "--use-precision-aware-optimizer") == 1);
    CHECK(after(a, "--exp-avg-dtype") == "bf16");
    CHECK(after(a, "--exp-avg-sq-dtype") == "fp16");
    // Written once, also on one dp rank, where a plain ZeRO-1 plan leaves it out (nothing to shard).
    CHECK(count(a, "--use-distributed-optimizer") == 1);
  }
  Scenario plain = llama(1);
  plain.parallel.optimizer_precision = {};
  const std::vector<std::string> a = megatron_arguments(test::planned(plain, {16, 16}));
  CHECK(count(a, "--use-precision-aware-optimizer") == 0);
  CHECK(count(a, "--use-distributed-optimizer") == 0);
  CHECK(after(a, "--exp-avg-dtype") == "absent");
}

TEST_CASE("torchtitan and DeepSpeed keep fp32 optimizer state: the precision-aware optimizer is refused") {
  Scenario s = llama(4);
  const Evaluation ev = test::planned(s, {16, 16});
  CHECK(bad_input([&] { export_plan(ExportTarget::Torchtitan, ev, "."); }) ==
        "--precision-aware-optimizer: --export torchtitan keeps fp32 master weights and Adam moments, not the narrower "
        "state simulated; leave it out or use --export megatron");
  CHECK(bad_input([&] { check_state_widths(ExportTarget::DeepSpeed, s.parallel); }) ==
        "--precision-aware-optimizer: --export deepspeed keeps fp32 master weights and Adam moments, not the narrower "
        "state simulated; leave it out or use --export megatron");
  check_state_widths(ExportTarget::Megatron, s.parallel);  // no throw
}

TEST_CASE("a plan file keeps the precision-aware optimizer, files without it read back without it") {
  const AnalyticCostModel cost;
  Scenario s = llama(4);
  s.ranges = split_layers(s.model, 2, {16, 16});
  const Evaluation ev = evaluate(s, cost);
  const std::string text = plan_to_json_text(ev, PlanExtras{});
  const PlanDocument doc = plan_from_json_text(text, "plan.json");
  CHECK(doc.scenario.parallel.optimizer_precision == s.parallel.optimizer_precision);
  CHECK(evaluate(doc.scenario, cost).metrics.peak_memory_bytes == ev.metrics.peak_memory_bytes);
  nlohmann::json j = nlohmann::json::parse(text);
  for (const char* field : {"precision_aware_optimizer", "exp_avg_dtype", "exp_avg_sq_dtype"}) j["parallel"].erase(field);
  CHECK(plan_from_json_text(j.dump(), "plan.json").scenario.parallel.optimizer_precision == OptimizerPrecision{});
  j["parallel"]["exp_avg_sq_dtype"] = "int8";
  CHECK(bad_input([&] { plan_from_json_text(j.dump(), "p.json"); }) ==
        "p.json: parallel.exp_avg_sq_dtype must be \"fp32\", \"fp16\", \"bf16\" or \"fp8\"");
}
