// `pipewright run`: the measured-vs-predicted report, the measured trace, bad input (exit 2, one line) and
// runtime failures (exit 1, naming the rank and the action).
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "uniform_profile.hpp"
#include "core/model.hpp"
#include "profiler/profile.hpp"

namespace {

using nlohmann::json;

const std::vector<std::string> kSleepUniform = {"run", "--model", source_path("examples/tiny-uniform.json"), "--cluster",
                                                "ideal", "--pp", "2", "--microbatches", "2", "--compute", "sleep",
                                                "--iterations", "2", "--warmup", "0"};



}  // namespace

TEST_CASE("run --json: measured against the simulator's prediction for the same configuration") {
  const CliResult r = run_cli(with(kSleepUniform, {"--schedule", "gpipe", "--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const CliResult sim = run_cli({"simulate", "--model", source_path("examples/tiny-uniform.json"), "--cluster", "ideal",
                                 "--pp", "2", "--microbatches", "2", "--schedule", "gpipe", "--json"});
  REQUIRE(sim.code == 0);
  const json predicted = json::parse(sim.out);
  CHECK(j["predicted_step_time_s"] == predicted["step_time_s"]);
  // Sleep compute waits at least each predicted time: gpipe's (m + p - 1)(F + B + W) = 3 x 12 ms at least.
  const double measured = j["measured_step_time_s"];
  CHECK(measured >= 0.036);
  CHECK(j["measured_step_times_s"].size() == 2);
  CHECK(j["measured_min_s"].get<double>() <= measured);
  CHECK(j["measured_max_s"].get<double>() >= measured);
  CHECK(j["error_pct"].get<double>() ==
        Approx((j["predicted_step_time_s"].get<double>() - measured) / measured * 100));
  REQUIRE(j["ranks"].size() == 2);
  for (const json& rank : j["ranks"]) {
    // 4 layers of 1 ms F, B and W per stage, 2 micro-batches: 24 ms of compute.
    CHECK(rank["predicted_busy_s"].get<double>() == Approx(0.024));
    CHECK(rank["busy_s"].get<double>() >= 0.024);
    // Busy and idle come from one measured iteration: they add up to its step time.
    const double step = rank["busy_s"].get<double>() + rank["idle_s"].get<double>();
    CHECK(step >= j["measured_min_s"].get<double>() - 1e-12);
    CHECK(step <= j["measured_max_s"].get<double>() + 1e-12);
    // The stage's activation deltas, replayed in the schedule's order, peak where the simulator's do.
    CHECK(rank["activation_peak_bytes"] == rank["predicted_activation_peak_bytes"]);
  }
  CHECK(j["losses"].empty());
}

TEST_CASE("run with real compute prints the table with the loss and writes the measured trace") {
  const std::string trace = std::string(PIPEWRIGHT_TEST_TMP) + "/run-trace.json";
  std::remove(trace.c_str());
  const CliResult r = run_cli({"run", "--model", source_path("examples/tiny-gpt.json"), "--cluster", "dgx-h100", "--pp",
                               "3", "--microbatches", "3", "--schedule", "zb-h1", "--iterations", "1", "--warmup", "0",
                               "--split", "3,2,1", "--trace", trace});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("tiny-gpt on dgx-h100: pp 3, schedule zb-h1, 3 micro-batches of 1 x 32 tokens\n") == 0);
  CHECK(r.out.find("backend cpu, real compute, ranks as threads, 1 iteration after 0 warm-up\n") != std::string::npos);
  for (const char* row : {"measured step time", "predicted step time", "error", "loss"})
    CHECK(r.out.find(std::string("  ") + row) != std::string::npos);
  CHECK(r.out.find("  rank  stages") != std::string::npos);
  std::ifstream in(trace);
  REQUIRE(in);
  const json t = json::parse(in);
  CHECK(t["otherData"]["tool"].get<std::string>().find("executor (cpu)") != std::string::npos);
  CHECK(t["otherData"]["schedule"] == "zb-h1");
  int computes = 0;
  for (const json& e : t["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "compute") ++computes;
  CHECK(computes == 3 * 3 * 3);  // F, B and W of 3 micro-batches on 3 ranks
}

TEST_CASE("run --profile predicts with the measured layer times") {
  // Every block of tiny-llama takes F = 1 ms, B = 2 ms, W = 3 ms; embedding, head and optimizer are free.
  const std::string path = write_uniform_block_profile(std::string(PIPEWRIGHT_TEST_TMP) + "/uniform-profile.json");
  const CliResult r = run_cli({"run", "--model", source_path("examples/tiny-llama.json"), "--cluster", "ideal", "--pp",
                               "2", "--microbatches", "2", "--schedule", "gpipe", "--split", "4,4", "--iterations", "1",
                               "--warmup", "0", "--compute", "sleep", "--profile", path, "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["cost_model"] == "profiled");
  // gpipe on the ideal cluster, 4 blocks per stage: (m + p - 1)(F + B + W) = 3 x 24 ms.
  CHECK(j["predicted_step_time_s"].get<double>() == Approx(0.072).epsilon(1e-6));
  CHECK(j["measured_step_time_s"].get<double>() >= 0.072);
  CHECK(j["ranks"][0]["predicted_busy_s"].get<double>() == Approx(0.048));
}

TEST_CASE("run: bad input exits 2 with one line naming the option") {
  check_bad_input(with(kSleepUniform, {"--backend", "tpu"}), "--backend: unknown backend 'tpu'; use cpu or cuda");
  check_bad_input({"run", "--model", source_path("examples/tiny-llama.json"), "--cluster", "ideal", "--microbatches", "2",
                   "--compute", "fast"},
                  "--compute: must be real or sleep, got 'fast'");
  check_bad_input({"run", "--model", source_path("examples/tiny-llama.json"), "--cluster", "dgx-h100", "--tp", "2",
                   "--microbatches", "2"},
                  "--tp: the cpu backend runs pipeline parallelism only, got --tp 2; use --tp 1");
  check_bad_input({"run", "--model", source_path("examples/tiny-llama.json"), "--cluster", "ideal", "--microbatches", "2",
                   "--iterations", "0"},
                  "--iterations: must be at least 1, got 0");
  check_bad_input(with(kSleepUniform, {"--timeout", "0"}), "--timeout: must be a number of seconds from 0.001 to 86400 (a day), got 0");
  check_bad_input(with(kSleepUniform, {"--optimizer", "lion"}), "--optimizer: unknown optimizer 'lion'; use sgd or adam");
  check_bad_input({"run", "--model", source_path("examples/tiny-uniform.json"), "--cluster", "ideal", "--pp", "2",
                   "--microbatches", "2"},
                  "--model: 'tiny-uniform' gives explicit per-layer costs and has no layers to compute; use a "
                  "transformer model (e.g. examples/tiny-llama.json) or --compute sleep");
  check_bad_input({"run", "--model", source_path("examples/tiny-gpt.json"), "--cluster", "ideal", "--microbatches", "2",
                   "--seq-len", "64"},
                  "--seq-len: 64 exceeds the 32 learned positions of 'tiny-gpt'; use --seq-len 32 or less");
  check_bad_input(with(kSleepUniform, {"--profile", "/nonexistent/profile.json"}),
                  "--profile: profile file '/nonexistent/profile.json' not found");
  check_bad_input(with(kSleepUniform, {"--no-profile", "--profile", "p.json"}),
                  "--no-profile: it drops the profile that --profile gives; keep one of them");
}

TEST_CASE("run: a rank that fails ends the run with exit 1, naming the rank and the action") {
  const CliResult r = run_cli({"run", "--model", source_path("examples/tiny-llama.json"), "--cluster", "ideal", "--pp",
                               "2", "--microbatches", "4", "--iterations", "1", "--warmup", "0", "--inject-failure",
                               "1:1F2"});
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "error: rank 1 failed at 1F2: injected failure (--inject-failure)\n");
}

TEST_CASE("run: every number is checked, NaN, infinities, a denormal rate and a timeout past a day are bad input") {
  const std::string timeout = "--timeout: must be a number of seconds from 0.001 to 86400 (a day), got ";
  // 1e10 s and inf used to overflow the deadline: the run failed at once, blaming the other ranks.
  const std::vector<std::pair<std::string, std::string>> timeouts = {
      {"1e10", "1e+10"}, {"inf", "inf"}, {"-inf", "-inf"}, {"nan", "nan"}, {"86401", "86401"}, {"1e-4", "0.0001"}};
  for (const auto& [given, shown] : timeouts) check_bad_input(with(kSleepUniform, {"--timeout", given}), timeout + shown);
  // --lr nan was refused while inf ran to a loss of -nan.
  const std::string lr = "--lr: must be a positive learning rate up to 1000 such as 0.001, got ";
  for (const char* rate : {"inf", "-inf", "nan", "0", "-0.1", "1e+308"}) check_bad_input(with(kSleepUniform, {"--lr", rate}), lr + rate);
  check_bad_input(with(kSleepUniform, {"--lr", "1e-310"}), lr + "1e-310 (a denormal, below the smallest normal double)");
}

TEST_CASE("run --inject-failure naming a rank or an action the schedule does not have is bad input naming what it has") {
  check_bad_input(with(kSleepUniform, {"--inject-failure", "2:2F0"}),
                  "--inject-failure: rank 2 is not in the schedule, whose ranks are 0..1; name one of them");
  check_bad_input(with(kSleepUniform, {"--inject-failure", "1:1F2"}),
                  "--inject-failure: rank 1 never runs 1F2; it runs F, BW of stage 1 for micro-batches 0..1, and their "
                  "sends and receives; name one of those");
  check_bad_input(with(kSleepUniform, {"--inject-failure", "0:1F0:stall"}),
                  "--inject-failure: rank 0 never runs 1F0; it runs F, BW of stage 0 for micro-batches 0..1, and their "
                  "sends and receives; name one of those");
  check_bad_input(with(kSleepUniform, {"--schedule", "zb-h1", "--inject-failure", "0:0BW1"}),
                  "--inject-failure: rank 0 never runs 0BW1; it runs F, B, W of stage 0 for micro-batches 0..1, and "
                  "their sends and receives; name one of those");
  check_bad_input(with(kSleepUniform, {"--schedule", "interleaved", "--vpp", "2", "--inject-failure", "0:1F0"}),
                  "--inject-failure: rank 0 never runs 1F0; it runs F, BW of stages 0, 2 for micro-batches 0..1, and "
                  "their sends and receives; name one of those");
  check_bad_input(with(kSleepUniform, {"--inject-failure", "one:1F0"}),
                  "--inject-failure: 'one:1F0' is not RANK:ACTION such as 1:1F2");
  // A receive is an action the rank runs: the hook fires there.
  const CliResult r = run_cli(with(kSleepUniform, {"--inject-failure", "1:1RECV_F1"}));
  CHECK(r.code == 1);
  CHECK(r.err == "error: rank 1 failed at 1RECV_F1: injected failure (--inject-failure)\n");
}

TEST_CASE("run judges whether the machine was shared from the ranks' CPU time, in --json and in the table") {
  const std::vector<std::string> real = {"run", "--model", source_path("examples/tiny-llama.json"), "--cluster", "ideal",
                                         "--pp", "2", "--microbatches", "2", "--iterations", "2", "--warmup", "0",
                                         "--no-profile"};
  const CliResult r = run_cli(with(real, {"--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json load = json::parse(r.out)["machine_load"];
  CHECK(load["judged"] == true);
  const double share = load["compute_cpu_share"];
  CHECK(share > 0);
  CHECK(share == Approx(load["compute_cpu_s"].get<double>() / load["compute_wall_s"].get<double>()));
  const bool others_busy = !load["other_load"].is_null() && load["other_load"].get<double>() > 0.25 * load["cores"].get<int>();
  CHECK(load["shared"] == (share < 0.8 || others_busy));
  CHECK(load["shared_below_cpu_share"] == 0.8);
  CHECK(load["shared_above_other_load_per_core"] == 0.25);
  CHECK(load["cores"].get<int>() >= 1);
  const std::string verdict = load["verdict"];
  CHECK(verdict.rfind("ranks ran ", 0) == 0);
  CHECK((verdict.find("the machine was shared, measured times are not comparable with the prediction") !=
         std::string::npos) == load["shared"].get<bool>());

  const CliResult table = run_cli(real);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("\n  machine               ranks ran ") != std::string::npos);

  // Sleep compute spends no CPU time in its actions: not judged.
  const CliResult sleeping = run_cli(with(kSleepUniform, {"--json"}));
  REQUIRE(sleeping.code == 0);
  const json idle = json::parse(sleeping.out)["machine_load"];
  CHECK(idle["judged"] == false);
  CHECK(idle["shared"] == false);
}
