// `pipewright run --dp N --ep N` on the cpu backend: data-parallel replicas of the pipeline as threads, the
// routed experts of the tiny MoE example spread over them; the prediction is the simulator's for what runs
// (plain data parallelism, gradients averaged after the last backward).
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {

using nlohmann::json;

std::vector<std::string> moe_run(const std::vector<std::string>& more) {
  std::vector<std::string> a = {"run",  "--model", source_path("examples/tiny-moe.json"), "--cluster", "ideal", "--pp", "2",
                                "--dp", "2",       "--ep",  "2",   "--microbatches", "4", "--iterations", "2", "--warmup",
                                "0",    "--no-profile"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("run --dp 2 --ep 2: a row per replica's rank, the loss falling, predicted as simulate predicts plain dp") {
  const CliResult r = run_cli(moe_run({}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("tiny-moe on ideal: pp 2, dp 2, ep 2, schedule 1f1b, 4 micro-batches of 1 x 32 tokens per replica\n") ==
        0);
  CHECK(r.out.find("  rank  replica  stages ") != std::string::npos);
  // simulate's defaults are ZeRO-1 with the reduction overlapped: run says what runs instead.
  const std::string note =
      "the replicas keep whole optimizer states and average their gradients after the last backward (not ZeRO-1, the "
      "reduction overlapped with the backward): the prediction is for that\n";
  CHECK(r.out.find(note) != std::string::npos);
  const CliResult plain = run_cli(moe_run({"--zero", "0", "--no-overlap-grad-reduce"}));
  REQUIRE(plain.code == 0);
  CHECK(plain.out.find("the replicas keep") == std::string::npos);

  const CliResult j = run_cli(moe_run({"--json"}));
  INFO(j.err);
  REQUIRE(j.code == 0);
  const json report = json::parse(j.out);
  CHECK(report["dp"] == 2);
  CHECK(report["ep"] == 2);
  REQUIRE(report["losses"].size() == 2);
  CHECK(report["losses"][1].get<double>() < report["losses"][0].get<double>());
  REQUIRE(report["ranks"].size() == 4);
  for (size_t w = 0; w < 4; ++w) {
    CHECK(report["ranks"][w]["rank"] == w % 2);
    CHECK(report["ranks"][w]["replica"] == w / 2);
    CHECK(report["ranks"][w]["predicted_busy_s"] == report["ranks"][w % 2]["predicted_busy_s"]);
  }
  // What the replicas do: whole optimizer states, gradients all-reduced after the last backward; and the
  // executor issues its MoE blocks from C++, without Megatron-Core's host floor (executor_cost_params).
  const CliResult sim = run_cli({"simulate", "--model", source_path("examples/tiny-moe.json"), "--cluster", "ideal", "--pp",
                                 "2", "--dp", "2", "--ep", "2", "--microbatches", "4", "--zero", "0",
                                 "--no-overlap-grad-reduce", "--no-overlap-param-gather", "--cost-param", "moe_host_s=0",
                                 "--json"});
  INFO(sim.err);
  REQUIRE(sim.code == 0);
  // 4 rank threads: where the machine has fewer cores they take turns on them (sim/pipeline_sim.hpp's
  // SharedCores, tested exactly in tests/sim/shared_cores_test.cpp), and the step can only grow.
  const double simulated = json::parse(sim.out)["step_time_s"];
  if (report["scenario"].contains("shared_cores"))
    CHECK(report["predicted_step_time_s"].get<double>() > simulated);
  else
    CHECK(report["predicted_step_time_s"] == simulated);
}

TEST_CASE("run with replicas: what the cpu backend cannot run is bad input naming the option") {
  const auto bad = [](const std::vector<std::string>& args, const std::string& message) {
    const CliResult r = run_cli(args);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "error: " + message + "\n");
  };
  bad(moe_run({"--etp", "2"}), "--etp: the cpu backend computes each expert whole, got --etp 2; use --etp 1");
  bad(moe_run({"--zero", "1"}),
      "--zero: the cpu backend's replicas keep whole optimizer states (plain data parallelism), got --zero 1; use "
      "--zero 0 or leave it out");
  bad(moe_run({"--distributed-optimizer"}),
      "--distributed-optimizer: the cpu backend's replicas keep whole optimizer states (plain data parallelism); leave "
      "it out");
  bad(moe_run({"--overlap-grad-reduce"}),
      "--overlap-grad-reduce: the cpu backend's replicas average their gradients after the last backward; leave it out");
  std::vector<std::string> ep4 = moe_run({});
  ep4[std::find(ep4.begin(), ep4.end(), "--ep") - ep4.begin() + 1] = "4";
  bad(ep4,
      "--ep: ep x etp = 4 x 1 does not divide the tp x cp x dp = 2 GPUs of a stage that the experts fold into; use an "
      "ep x etp that divides 2");
}
