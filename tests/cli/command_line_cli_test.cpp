// The command line answers typos with the nearest valid name, takes Megatron-LM's spellings of the
// same settings, durations with units, and shows negatable flags' defaults as their descriptions say.
#include <catch2/catch.hpp>

#include "cli/argument_check.hpp"
#include "cli/duration_option.hpp"
#include "tests/cli/cli_test_util.hpp"

namespace {

const std::vector<std::string> kLlamaPlan = {"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64",
                                        "--global-batch-size", "128", "--top", "1", "--json"};

}  // namespace

TEST_CASE("an unknown option is named with the nearest valid one before any required option is missed") {
  check_bad_input({"plan", "--modle", "llama3-8b"}, "plan: unknown option --modle; did you mean --model?");
  check_bad_input({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch", "128"},
                  "plan: unknown option --global-batch; did you mean --global-batch-size?");
  check_bad_input({"serve", "plan", "--model", "llama3-8b", "--zzz"},
                  "serve plan: unknown option --zzz; pipewright serve plan --help lists the options");
}

TEST_CASE("an option of another command says which commands have it") {
  check_bad_input({"simulate", "--spares", "2"}, "simulate: unknown option --spares; --spares is an option of plan");
  check_bad_input({"simulate", "--top", "2"},
                  "simulate: unknown option --top; did you mean --tp? (--top is an option of plan, replan, serve plan)");
}

TEST_CASE("an unknown command is named with the nearest command") {
  check_bad_input({"plna"}, "pipewright: unknown command 'plna'; did you mean 'plan'?");
  check_bad_input({"serve", "simulat"}, "pipewright serve: unknown command 'simulat'; did you mean 'simulate'?");
  check_bad_input({"frobnicate"},
                  "pipewright: unknown command 'frobnicate'; the commands are simulate, show, compare, plan, replan, "
                  "serve, models, clusters, run, profile, calibrate, kernels");
}

TEST_CASE("values that look like options stay values") {
  // "-inf" after --timeout is the value, answered by the option's own range check.
  check_bad_input({"run", "--model", kLlama, "--cluster", "ideal", "--pp", "2", "--microbatches", "2", "--timeout", "-inf"},
                  "--timeout: must be a number of seconds from 0.001 to 86400 (a day), got -inf");
}

TEST_CASE("Megatron-LM's spellings give the same plan as pipewright's") {
  const CliResult ours = run_cli(with(kLlamaPlan, {"--seq-len", "4096", "--tp", "4", "--pp", "2", "--distributed-optimizer"}));
  const CliResult megatron = run_cli(with(kLlamaPlan, {"--seq-length", "4096", "--tensor-model-parallel-size=4",
                                                  "--pipeline-model-parallel-size", "2", "--use-distributed-optimizer"}));
  INFO(megatron.err);
  REQUIRE(ours.code == 0);
  CHECK(megatron.code == 0);
  CHECK(megatron.out == ours.out);
  CHECK(ours.out.find("\"tp\": 4") != std::string::npos);
}

TEST_CASE("a command's help lists the Megatron-LM spellings it takes, and only those") {
  const CliResult plan = run_cli({"plan", "--help"});
  CHECK(plan.out.find("  --seq-length for --seq-len\n") != std::string::npos);
  CHECK(plan.out.find("  --moe-token-dispatcher-type for --dispatcher\n") != std::string::npos);
  const CliResult models = run_cli({"models", "--help"});
  CHECK(models.out.find("Megatron-LM") == std::string::npos);
}

TEST_CASE("help shows negatable flags without the value the negation sets") {
  const CliResult r = run_cli({"plan", "--help"});
  CHECK(r.out.find("  --distributed-optimizer,--no-distributed-optimizer\n") != std::string::npos);
  CHECK(r.out.find("{false}") == std::string::npos);
}

TEST_CASE("durations take units, a bare number in the option's own unit") {
  CHECK(pw::duration_seconds("50ms", 1.0) == Approx(0.05));
  CHECK(pw::duration_seconds("2.5", 1.0) == 2.5);
  CHECK(pw::duration_seconds("24", 3600.0) == 86400.0);
  CHECK(pw::duration_seconds("2d", 3600.0) == 172800.0);
  CHECK(pw::duration_seconds("30min", 1.0) == 1800.0);
  CHECK(pw::duration_seconds("100us", 1.0) == Approx(1e-4));
  CHECK_FALSE(pw::duration_seconds("50parsecs", 1.0).has_value());
  CHECK_FALSE(pw::duration_seconds("ms", 1.0).has_value());
  check_bad_input({"serve", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--tpot-slo", "50 ms"},
                  "--tpot-slo: '50 ms' is not a duration; give a number with a unit: us, ms, s, min, h or d (e.g. 50ms)");
}

TEST_CASE("an SLO in milliseconds is the same SLO in seconds") {
  const std::vector<std::string> serve = {"serve", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
                                          "--requests", "50", "--prompt-tokens", "500", "--output-tokens", "50", "--json"};
  const CliResult ms = run_cli(with(serve, {"--tpot-slo", "50ms", "--ttft-slo", "1500ms"}));
  const CliResult s = run_cli(with(serve, {"--tpot-slo", "0.05", "--ttft-slo", "1.5"}));
  INFO(ms.err);
  REQUIRE(s.code == 0);
  CHECK(ms.code == 0);
  CHECK(ms.out == s.out);
}

TEST_CASE("the nearest name needs to be near") {
  CHECK(pw::nearest_name("--modle", {"--model", "--cluster"}) == "--model");
  CHECK(pw::nearest_name("--xyzzy", {"--model", "--cluster"}).empty());
  CHECK(pw::nearest_name("--glob", {"--global-batch-size", "--gpus"}) == "--global-batch-size");
  CHECK(pw::nearest_name("plna", {"plan", "replan"}) == "plan");
}
