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

TEST_CASE("plan --fail weighs the ways on: dropping replicas, re-splitting and re-planning with the same global batch") {
  const CliResult text = run_cli(with(kPlan, {"--fail", "1node"}));
  INFO(text.err);
  REQUIRE(text.code == 0);
  const size_t at = text.out.find("\nif 1 node (8 GPUs) fails, 24 GPUs are left; the ways on, by tokens/s:\n"
                                  "  #  way              GPUs   step time    tokens/s    lost  changes\n");
  REQUIRE(at != std::string::npos);
  CHECK(text.out.find("\nthe re-plan's plans on the 24 GPUs left:\ngpt3-1.3b on dgx-h100: 24 GPUs, global batch 64", at) !=
        std::string::npos);
  CHECK(text.out.find("\nre-plan: plan 1 uses ", at) != std::string::npos);

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
  // The three ways, ranked by tokens/s; the re-plan's is its plan 1.
  const nlohmann::json& ways = f.at("ways");
  REQUIRE(ways.size() == 3);
  std::vector<std::string> names;
  for (size_t i = 0; i < ways.size(); ++i) {
    names.push_back(ways[i].at("way").get<std::string>());
    if (i > 0 && ways[i].contains("throughput_tokens_per_s"))
      CHECK(ways[i - 1].at("throughput_tokens_per_s").get<double>() >= ways[i].at("throughput_tokens_per_s").get<double>());
    if (ways[i].at("way") == "re-plan")
      CHECK(ways[i].at("throughput_tokens_per_s").get<double>() == p.at("throughput_tokens_per_s").get<double>());
  }
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"drop replicas", "re-plan", "re-split"});
}

TEST_CASE("plan --fail: dropping replicas keeps the layout and moves the batch only within --batch-tolerance") {
  // tp 1 x pp 2 x dp 16 on 4 nodes: one node down leaves room for 12 replicas, whose micro-batches of 1 make
  // 60 or 72 sequences, not 64.
  const std::vector<std::string> fixed = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "32",
                                          "--global-batch-size", "64", "--seq-len", "1024", "--tp", "1", "--pp", "2",
                                          "--dp", "16", "--top", "1", "--fail", "1node"};
  const auto way_named = [](const nlohmann::json& ways, const std::string& name) {
    for (const nlohmann::json& w : ways)
      if (w.at("way") == name) return w;
    FAIL("no way " << name);
    return nlohmann::json();
  };
  const CliResult strict = run_cli(with(fixed, {"--json"}));
  INFO(strict.err);
  REQUIRE(strict.code == 0);
  const nlohmann::json ways = nlohmann::json::parse(strict.out).at("failure").at("ways");
  CHECK(way_named(ways, "drop replicas").at("verdict") ==
        "12 replicas of micro-batches of 1 run 60 or 72 sequences, -6.2% or +12.5% from the global batch of 64: beyond "
        "--batch-tolerance 2.0%");
  CHECK(ways.back().at("way") == "drop replicas");  // no plan: ranked last

  const CliResult loose = run_cli(with(fixed, {"--json", "--batch-tolerance", "10%"}));
  REQUIRE(loose.code == 0);
  const nlohmann::json drop = way_named(nlohmann::json::parse(loose.out).at("failure").at("ways"), "drop replicas");
  CHECK(drop.at("gpus") == 24);
  CHECK(drop.at("global_batch_size") == 60);
  CHECK(drop.at("changes") == "dp=12 (not 16), 5 micro-batches (not 4), global batch 60 (-6.2%); the same split");

  check_bad_input(with(fixed, {"--batch-tolerance", "60%"}),
                  "--batch-tolerance: '60%' is not a share of the global batch; give a percentage from 0% to 50%, such as 5%");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "32", "--global-batch-size", "64",
                   "--batch-tolerance", "5%"},
                  "--batch-tolerance: it weighs the ways on after a failure; give --fail too (e.g. --fail 1node)");
}

TEST_CASE("replan of Llama 3 405B on 16,384 GPUs after two nodes fail offers dp 127 with the same layout") {
  // The issue's run: tp 8 x pp 16 x dp 128, 2,048 sequences of 8,192 tokens. Re-planned with the batch held
  // fixed it became pp 127 x dp 8; dropping the broken replica keeps everything but dp and 16 sequences.
  const std::string path = tmp("llama3-405b-16k.json");
  const CliResult plan = run_cli({"plan", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "16384",
                                  "--global-batch-size", "2048", "--seq-len", "8192", "--tp", "8", "--cp", "1", "--pp",
                                  "16", "--dp", "128", "--top", "1", "--out", path});
  INFO(plan.err);
  REQUIRE(plan.code == 0);
  const CliResult r = run_cli({"replan", "--plan", path, "--failed-nodes", "3,17", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json ways = nlohmann::json::parse(r.out).at("after").at("ways");
  bool found = false;
  for (const nlohmann::json& w : ways) {
    if (w.at("way") != "drop replicas") continue;
    found = true;
    CHECK(w.at("gpus") == 16256);
    CHECK(w.at("global_batch_size") == 2032);
    CHECK(w.at("changes") == "dp=127 (not 128), 16 micro-batches, global batch 2032 (-0.8%); the same split");
    CHECK(w.at("throughput_lost").get<double>() == Approx(1.0 / 128).margin(0.002));
  }
  CHECK(found);
  // The re-plan keeps to pipelines of two layers a rank or more, as plan does.
  for (const nlohmann::json& w : ways)
    if (w.at("way") == "re-plan") CHECK(w.at("changes").get<std::string>().find("pp=127") == std::string::npos);
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
  CHECK(text.out.find("\nnodes 0, 3 of 4 failed, 16 GPUs are left; the ways on, by tokens/s:\n") != std::string::npos);

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

TEST_CASE("plan --spares: spares beside the run, how often it is short of them, what it costs, and the plans it runs short on") {
  const CliResult r = run_cli(with(kPlan, {"--train-tokens", "10B", "--gpu-hour-price", "2", "--spares", "1", "--mtbf-per-gpu",
                                           "1000", "--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& sp = j.at("spares");
  CHECK(sp.at("run_nodes") == 4);
  const double mu = 4.0 * 8 / 1000 * 24;  // the run's nodes x GPUs per node / MTBF x the 24 h repair
  CHECK(sp.at("mean_nodes_down").get<double>() == Approx(mu).epsilon(1e-12));
  const nlohmann::json& short_plans = sp.at("short_plans");
  REQUIRE(short_plans.size() >= 2);
  CHECK(short_plans[0].at("way") == "plan 1");
  CHECK(short_plans[0].at("tokens_per_s").get<double>() == j.at("plans")[0].at("throughput_tokens_per_s").get<double>());
  CHECK(short_plans[1].at("gpus") == 24);
  REQUIRE(sp.at("rows").size() == 2);
  const nlohmann::json& none = sp.at("rows")[0];
  CHECK(none.at("gpus") == 32);
  CHECK(none.at("short_probability").get<double>() == Approx(1 - std::exp(-mu)).epsilon(1e-9));
  CHECK(none.at("expected_tokens_per_s").get<double>() < short_plans[0].at("tokens_per_s").get<double>());
  CHECK(none.at("gpu_hours").get<double>() == Approx(none.at("wall_s").get<double>() / 3600 * 32).epsilon(1e-12));
  CHECK(none.at("cost").get<double>() == Approx(2 * none.at("gpu_hours").get<double>()).epsilon(1e-12));
  const nlohmann::json& one = sp.at("rows")[1];
  CHECK(one.at("gpus") == 40);  // the spare is paid for beside the run's 32
  CHECK(one.at("gpu_hours").get<double>() == Approx(one.at("wall_s").get<double>() / 3600 * 40).epsilon(1e-12));
  CHECK(one.at("short_probability").get<double>() == Approx(1 - std::exp(-mu) * (1 + mu)).epsilon(1e-9));
  CHECK(one.at("wall_s").get<double>() < none.at("wall_s").get<double>());

  // One computation: with spares enough, the time to train is the main table's.
  const CliResult rare = run_cli(with(kPlan, {"--train-tokens", "10B", "--spares", "4", "--mtbf-per-gpu", "1000000", "--json"}));
  REQUIRE(rare.code == 0);
  const nlohmann::json k = nlohmann::json::parse(rare.out);
  CHECK(k.at("spares").at("rows")[4].at("wall_s").get<double>() ==
        Approx(k.at("plans")[0].at("training_run").at("wall_s").get<double>()).epsilon(1e-12));

  const CliResult text = run_cli(with(kPlan, {"--train-tokens", "10B", "--spares", "1"}));
  REQUIRE(text.code == 0);
  CHECK(text.out.find("\nspare nodes for 10B tokens on 4 nodes: a failed node is back after 24.0 h (--repair)") !=
        std::string::npos);
  CHECK(text.out.find("\nnodes short    GPUs  plan ") != std::string::npos);
  CHECK(text.out.find("\nspares    GPUs  short of spares ") != std::string::npos);

  check_bad_input(with(kPlan, {"--spares", "1"}), "--spares: give --train-tokens too; the run's length decides what spares are worth");
  check_bad_input(with(kPlan, {"--train-tokens", "10B", "--spares", "5"}), "--spares: 5 spare nodes beside the run's 4; give 0 to 4");
  check_bad_input(with(kPlan, {"--train-tokens", "10B", "--spares", "1", "--repair", "-3"}),
              "--repair: must be from 0.001 to 1e+06 h, got -3");
}
