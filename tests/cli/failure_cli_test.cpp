// `plan --fail` and `replan`: the plans on what a failure leaves, what they lose and change, and bad input.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cli_test_util.hpp"
#include "../temp_folder.hpp"

namespace {

const std::vector<std::string> kPlan = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "32",
                                        "--global-batch-size", "64", "--seq-len", "1024", "--schedules",
                                        "1f1b,interleaved,zb-v", "--top", "2"};




}  // namespace

TEST_CASE("plan --fail plans on what is left with the same global batch") {
  const CliResult text = run_cli(with(kPlan, {"--fail", "1node"}));
  INFO(text.err);
  REQUIRE(text.code == 0);
  const size_t at = text.out.find("\nif 1 node (8 GPUs) fails, 24 GPUs are left:\ngpt3-1.3b on dgx-h100: 24 GPUs, global batch 64");
  REQUIRE(at != std::string::npos);
  CHECK(text.out.find("\nafter the failure plan 1 uses ", at) != std::string::npos);

  const CliResult r = run_cli(with(kPlan, {"--fail", "3gpus", "--json"}));
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& f = j.at("failure");
  CHECK(f.at("lost") == "3 GPUs");
  CHECK(f.at("lost_gpus") == 3);
  CHECK(f.at("gpus_left") == 29);
  const nlohmann::json& p = f.at("plans")[0];
  const int used = p.at("tp").get<int>() * p.at("cp").get<int>() * p.at("pp").get<int>() * p.at("dp").get<int>();
  CHECK(used <= 29);
  CHECK(f.at("gpus_used") == used);
  CHECK(p.at("micro_batch_size").get<int>() * p.at("microbatches").get<int>() * p.at("dp").get<int>() == 64);
  CHECK(f.at("throughput_lost").get<double>() ==
        1 - p.at("throughput_tokens_per_s").get<double>() / j.at("plans")[0].at("throughput_tokens_per_s").get<double>());
}

TEST_CASE("plan --fail: bad counts are one line naming --fail") {
  check_bad_input(with(kPlan, {"--fail", "15Q"}), "--fail: '15Q' is not a count of GPUs or nodes; give e.g. 8, 8gpus or 1node");
  check_bad_input(with(kPlan, {"--fail", "0"}), "--fail: '0' loses nothing; give at least 1 GPU or node");
  check_bad_input(with(kPlan, {"--fail", "4nodes"}), "--fail: 4 nodes (32 GPUs) leaves none of the plan's 32 GPUs; fail fewer");
  const std::string cluster = tmp("two-nodes.json");
  std::ofstream(cluster) << R"({"name": "two-nodes", "nodes": 2, "gpus_per_node": 8,
    "gpu": {"name": "H100", "peak_tflops": 989, "memory_bytes": 80e9, "hbm_bytes_per_s": 3.35e12},
    "intra_node": {"bandwidth_bytes_per_s": 450e9, "latency_s": 3e-6},
    "inter_node": {"bandwidth_bytes_per_s": 50e9, "latency_s": 8e-6}})";
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", cluster, "--gpus", "8", "--global-batch-size", "16",
               "--fail", "3nodes"},
              "--fail: 3 nodes is more than cluster 'two-nodes' has (16 GPUs); fail fewer");
}

TEST_CASE("replan re-plans a plan file on the nodes left") {
  const std::string path = tmp("replan-plan.json");
  const CliResult plan = run_cli(with(kPlan, {"--out", path}));
  REQUIRE(plan.code == 0);
  const CliResult r = run_cli({"replan", "--plan", path, "--failed-nodes", "1", "--top", "2", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("failed_nodes") == nlohmann::json::array({1}));
  CHECK(j.at("before").at("gpus") == 32);
  const nlohmann::json& after = j.at("after");
  CHECK(after.at("gpus_left") == 24);
  CHECK(after.at("gpus_lost").get<double>() == 0.25);
  REQUIRE(after.at("plans").size() == 2);

  const CliResult text = run_cli({"replan", "--plan", path, "--failed-nodes", "0,3"});
  REQUIRE(text.code == 0);
  CHECK(text.out.find("\nnodes 0, 3 of 4 failed, 16 GPUs are left:\n") != std::string::npos);

  check_bad_input({"replan", "--plan", path, "--failed-nodes", "4"},
              "--failed-nodes: node 4 is not one of the run's nodes, 0 to 3; give indices in that range");
  check_bad_input({"replan", "--plan", path}, "--failed-nodes: list the failed nodes, e.g. --failed-nodes 3,17");
  check_bad_input({"replan", "--failed-nodes", "1"}, "--plan: give the plan file the run was started from (pipewright plan --out)");
  // The running job's plan is never overwritten, by its own name, another spelling of it or a link to it.
  const std::string before = file_contents(path);
  check_bad_input({"replan", "--plan", path, "--failed-nodes", "1", "--out", path},
                  "--out: '" + path + "' is an input of this command (--plan); write the output to another file");
  const std::string dotted = tmp("./replan-plan.json");
  check_bad_input({"replan", "--plan", path, "--failed-nodes", "1", "--out", dotted},
                  "--out: '" + dotted + "' is an input of this command (--plan); write the output to another file");
  const std::string link = tmp("replan-plan-link.json");
  std::filesystem::remove(link);
  std::filesystem::create_symlink(path, link);
  check_bad_input({"replan", "--plan", path, "--failed-nodes", "1", "--out", link},
                  "--out: '" + link + "' is an input of this command (--plan); write the output to another file");
  CHECK(file_contents(path) == before);
}

TEST_CASE("plan --spares: per number of spare nodes the plan, how often the run is short and what the run costs") {
  const CliResult r = run_cli(with(kPlan, {"--train-tokens", "10B", "--gpu-hour-price", "2", "--spares", "1", "--mtbf-per-gpu",
                                           "1000", "--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& sp = j.at("spares");
  CHECK(sp.at("pool_nodes") == 4);
  const double mu = 4.0 * 8 / 1000 * 24;  // nodes x GPUs per node / MTBF x the 24 h repair
  CHECK(sp.at("mean_nodes_down").get<double>() == Approx(mu).epsilon(1e-12));
  REQUIRE(sp.at("rows").size() == 2);
  const nlohmann::json& none = sp.at("rows")[0];
  CHECK(none.at("gpus") == 32);
  CHECK(none.at("tokens_per_s").get<double>() == j.at("plans")[0].at("throughput_tokens_per_s").get<double>());
  CHECK(none.at("short_probability").get<double>() == Approx(1 - std::exp(-mu)).epsilon(1e-9));
  CHECK(none.at("expected_tokens_per_s").get<double>() < none.at("tokens_per_s").get<double>());
  CHECK(none.at("gpu_hours").get<double>() == Approx(none.at("wall_s").get<double>() / 3600 * 32).epsilon(1e-12));
  CHECK(none.at("cost").get<double>() == Approx(2 * none.at("gpu_hours").get<double>()).epsilon(1e-12));
  const nlohmann::json& one = sp.at("rows")[1];
  CHECK(one.at("gpus") == 24);
  CHECK(one.at("short_probability").get<double>() == Approx(1 - std::exp(-mu) * (1 + mu)).epsilon(1e-9));

  const CliResult text = run_cli(with(kPlan, {"--train-tokens", "10B", "--spares", "1"}));
  REQUIRE(text.code == 0);
  CHECK(text.out.find("\nspare nodes for 10B tokens on 4 nodes: a failed node is back after 24.0 h (--repair)") !=
        std::string::npos);
  CHECK(text.out.find("\nspares   GPUs  plan ") != std::string::npos);

  check_bad_input(with(kPlan, {"--spares", "1"}), "--spares: give --train-tokens too; the run's length decides what spares are worth");
  check_bad_input(with(kPlan, {"--train-tokens", "10B", "--spares", "4"}), "--spares: 4 spare nodes of the run's 4; give 0 to 3");
  check_bad_input(with(kPlan, {"--train-tokens", "10B", "--spares", "1", "--repair", "-3"}),
              "--repair: must be from 0.001 to 1e+06 h, got -3");
}
