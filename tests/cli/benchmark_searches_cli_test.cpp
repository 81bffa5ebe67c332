// The searches docs/benchmarks.md times (issue 40's targets) keep their plans while they are made
// faster: each plan's configuration and its predicted figures, to nine significant digits, against a golden file
// written before the searches were touched.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "../golden.hpp"

namespace {

// One line per plan: its fields in the JSON's order, numbers to 9 significant digits.
std::string plan_lines(const std::vector<std::string>& args, const std::vector<std::string>& fields) {
  const CliResult r = run_cli(with(args, {"--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  std::string out = fmt::format("{} configurations\n", doc.at("configurations").get<long>());
  for (const nlohmann::json& plan : doc.at("plans")) {
    std::string line;
    for (const std::string& f : fields) {
      const nlohmann::json& v = plan.at(f);
      line += f + "=";
      if (v.is_number_float()) line += fmt::format("{:.9g}", v.get<double>());
      else line += v.dump();
      line += " ";
    }
    line.back() = '\n';
    out += line;
  }
  return out;
}

const std::vector<std::string> kTrainingFields = {
    "tp", "cp", "ep", "etp", "pp", "dp", "zero", "precision", "vpp", "micro_batch_size", "microbatches", "schedule",
    "recompute", "rank_order", "split", "step_time_s", "peak_memory_bytes"};

}  // namespace

TEST_CASE("the benchmarked searches keep their plans: GPT-3 175B on 1024 A100s", "[cli][plan][slow]") {
  check_golden("planner/search-gpt3-175b.txt",
               plan_lines({"plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1024",
                           "--global-batch-size", "1536", "--top", "5", "--threads", "2"},
                          kTrainingFields));
}

TEST_CASE("the benchmarked searches keep their plans: DeepSeek-V3 on 2048 H800s with ep and ZeRO searched",
          "[cli][plan][slow]") {
  check_golden("planner/search-deepseek-v3.txt",
               plan_lines({"plan", "--model", source_path("examples/deepseek-v3.config.json"), "--cluster", "dgx-h800",
                           "--gpus", "2048", "--global-batch-size", "15360", "--max-ep", "64", "--zeros", "1,2,3",
                           "--top", "3", "--threads", "2"},
                          kTrainingFields));
}

TEST_CASE("the benchmarked searches keep their plans: serve plan of 1000 GPUs, disaggregated pools searched",
          "[cli][serve][slow]") {
  check_golden("planner/serve-plan-1000-gpus.txt",
               plan_lines({"serve", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "1000",
                           "--disaggregate", "--top", "5"},
                          {"tp", "pp", "replicas", "dp_attention", "ep", "prefill_pool", "output_tokens_per_s",
                           "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "kv_capacity_tokens"}));
}

TEST_CASE("the benchmarked searches keep their plans: serve plan of 1000 GPUs with varied lengths",
          "[cli][serve][slow]") {
  check_golden("planner/serve-plan-1000-gpus-varied.txt",
               plan_lines({"serve", "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "1000",
                           "--disaggregate", "--prompt-tokens", "uniform:128:2048", "--output-tokens", "uniform:16:512",
                           "--requests", "1000", "--top", "5"},
                          {"tp", "pp", "replicas", "dp_attention", "ep", "prefill_pool", "output_tokens_per_s",
                           "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "kv_capacity_tokens"}));
}
