// --precision-aware-optimizer with --exp-avg-dtype and --exp-avg-sq-dtype on the command line: what simulate
// reports, what plan and run refuse, and what a plan file carries to run.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {

using nlohmann::json;

const std::vector<std::string> kLlama8b = {"simulate", "--model", "llama3-8b", "--cluster", "dgx-h100",
                                           "--dp",     "8",       "--global-batch-size", "64"};
const std::vector<std::string> kBf16Moments = {"--precision-aware-optimizer", "--exp-avg-dtype", "bf16",
                                               "--exp-avg-sq-dtype", "bf16"};

json simulated(const std::vector<std::string>& args) {
  const CliResult r = run_cli(with(args, {"--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("simulate: bf16 Adam moments take 6 bytes of each parameter's 12 of optimizer state, sharded over dp") {
  const json fp32 = simulated(kLlama8b);
  const json bf16 = simulated(with(kLlama8b, kBf16Moments));
  CHECK_FALSE(fp32["precision_aware_optimizer"].get<bool>());
  CHECK(bf16["precision_aware_optimizer"].get<bool>());
  CHECK(bf16["exp_avg_dtype"] == "bf16");
  CHECK(bf16["exp_avg_sq_dtype"] == "bf16");
  // ZeRO-1 over dp 8: 12 / 8 bytes a parameter become 6 / 8, on every one of the model's parameters.
  const CliResult show = run_cli({"models", "--show", "llama3-8b", "--json"});
  REQUIRE(show.code == 0);
  const double parameters = json::parse(show.out)["total_parameters"].get<double>();
  CHECK(fp32["peak_memory_bytes"].get<double>() - bf16["peak_memory_bytes"].get<double>() ==
        Approx(parameters * 6.0 / 8).epsilon(1e-9));
  const CliResult text = run_cli(with(kLlama8b, kBf16Moments));
  CHECK(text.out.find("(precision-aware optimizer: 6 B of optimizer state a parameter, Adam moments in bf16 and bf16)\n") !=
        std::string::npos);
}

TEST_CASE("the precision-aware optimizer's bad input: one line naming the option, exit 2") {
  check_bad_input(with(kLlama8b, {"--exp-avg-dtype", "bf16"}),
                  "--exp-avg-dtype: takes effect only with the precision-aware optimizer; add --precision-aware-optimizer");
  check_bad_input(with(kLlama8b, {"--exp-avg-sq-dtype", "fp16"}),
                  "--exp-avg-sq-dtype: takes effect only with the precision-aware optimizer; add "
                  "--precision-aware-optimizer");
  check_bad_input(with(kLlama8b, {"--precision-aware-optimizer", "--exp-avg-dtype", "bf8"}),
                  "--exp-avg-dtype: unknown dtype 'bf8'; use fp32, fp16, bf16 or fp8");
  // megatron/core/optimizer/__init__.py raises "--use-precision-aware-optimizer only supported with
  // distributed optimizer".
  const std::string needs = "--precision-aware-optimizer: Megatron-Core runs it only with the distributed optimizer; "
                            "give --zero 1 (the default) or more, or leave it out";
  check_bad_input(with(kLlama8b, {"--precision-aware-optimizer", "--zero", "0"}), needs);
  check_bad_input(with(kLlama8b, {"--precision-aware-optimizer", "--no-distributed-optimizer"}), needs);
  const std::vector<std::string> plan = {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                         "--global-batch-size", "64", "--precision-aware-optimizer"};
  check_bad_input(with(plan, {"--no-distributed-optimizer"}), needs);
  check_bad_input(with(plan, {"--zeros", "0,1"}),
                  "--zeros: ZeRO-0 has no distributed optimizer, which --precision-aware-optimizer needs; list levels "
                  "from 1");
  // Refused before the search: torchtitan's and DeepSpeed's Adam keep fp32 state.
  check_bad_input(with(plan, {"--export", "torchtitan", "--out", tmp("pa-tt")}),
                  "--precision-aware-optimizer: --export torchtitan keeps fp32 master weights and Adam moments, not the "
                  "narrower state simulated; leave it out or use --export megatron");
}

TEST_CASE("run: the executor's optimizer keeps its state whole: asked, it refuses, from a plan it says so") {
  const std::vector<std::string> run = {"run",        "--model",  source_path("examples/tiny-uniform.json"),
                                        "--cluster",  "ideal",    "--pp", "2", "--microbatches", "2",
                                        "--compute",  "sleep",    "--iterations", "1", "--warmup", "0"};
  check_bad_input(with(run, {"--precision-aware-optimizer"}),
                  "--precision-aware-optimizer: the cpu backend's optimizer keeps its state at its weights' width; "
                  "leave it out");
  // The same for SwiGLU inputs kept in fp8 (a plan's setting is noted below, as the optimizer's is).
  check_bad_input(with(run, {"--activation-func-fp8-input-store"}),
                  "--activation-func-fp8-input-store: the cpu backend keeps the SwiGLU inputs at its own width; leave it "
                  "out");
  const std::string plan = tmp("precision-aware-plan.json");
  const CliResult planned = run_cli({"plan", "--model", source_path("examples/tiny-uniform.json"), "--cluster", "ideal",
                                     "--gpus", "2", "--global-batch-size", "4", "--precision-aware-optimizer",
                                     "--exp-avg-dtype", "bf16", "--out", plan});
  INFO(planned.err);
  REQUIRE(planned.code == 0);
  const CliResult r = run_cli({"run", "--plan", plan, "--compute", "sleep", "--iterations", "1", "--warmup", "0",
                               "--no-profile"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("the executor's optimizer keeps its state at the weights' width (not the precision-aware "
                   "optimizer): the prediction is for that\n") != std::string::npos);
  const std::string stored = tmp("fp8-input-store-plan.json");
  const CliResult planned_store = run_cli({"plan", "--model", source_path("examples/tiny-llama.json"), "--cluster",
                                           "ideal", "--gpus", "2", "--global-batch-size", "4",
                                           "--activation-func-fp8-input-store", "--out", stored});
  INFO(planned_store.err);
  REQUIRE(planned_store.code == 0);
  const CliResult from_plan = run_cli({"run", "--plan", stored, "--compute", "sleep", "--iterations", "1", "--warmup",
                                       "0", "--no-profile"});
  INFO(from_plan.err);
  REQUIRE(from_plan.code == 0);
  CHECK(from_plan.out.find("the executor keeps the SwiGLU inputs at its own width (not fp8): the prediction is for "
                           "that\n") != std::string::npos);
}
