// --memory-accounting: simulate counts what the cpu backend keeps when told, and then predicts the peaks that
// run measures on it.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {

using nlohmann::json;


std::vector<std::string> scenario(const std::string& command, const std::vector<std::string>& more) {
  std::vector<std::string> args{command, "--model", kLlama, "--cluster", "ideal", "--pp", "2", "--microbatches", "4",
                                "--schedule", "zb-h1", "--split", "5,3", "--json"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<double> peaks(const json& ranks, const char* field) {
  std::vector<double> out;
  for (const json& r : ranks) out.push_back(r[field].get<double>());
  return out;
}

}  // namespace

TEST_CASE("simulate --memory-accounting cpu-float32 predicts the activation peaks run measures") {
  const CliResult sim = run_cli(scenario("simulate", {"--memory-accounting", "cpu-float32"}));
  INFO(sim.err);
  REQUIRE(sim.code == 0);
  const CliResult gpu = run_cli(scenario("simulate", {}));
  REQUIRE(gpu.code == 0);
  const CliResult ran = run_cli(scenario("run", {"--no-profile", "--iterations", "1", "--warmup", "0"}));
  INFO(ran.err);
  REQUIRE(ran.code == 0);
  // One stage a rank: each stage's entry carries its rank's peak.
  const std::vector<double> cpu_peaks = peaks(json::parse(sim.out)["stages"], "activation_peak_bytes");
  const std::vector<double> measured = peaks(json::parse(ran.out)["ranks"], "activation_peak_bytes");
  REQUIRE(measured.size() == 2);
  CHECK(cpu_peaks == measured);
  CHECK(peaks(json::parse(ran.out)["ranks"], "predicted_activation_peak_bytes") == measured);
  // The default counts a GPU framework's bf16 tensors: less than the cpu backend's float32 ones.
  const std::vector<double> bf16_peaks = peaks(json::parse(gpu.out)["stages"], "activation_peak_bytes");
  for (size_t r = 0; r < measured.size(); ++r) CHECK(bf16_peaks[r] < measured[r]);

  const CliResult bad = run_cli(scenario("simulate", {"--memory-accounting", "fp16"}));
  CHECK(bad.code == 2);
  CHECK(bad.err == "error: --memory-accounting: unknown accounting 'fp16'; use gpu-bf16, cpu-float32, cuda-bf16 or cuda-float32\n");
}
