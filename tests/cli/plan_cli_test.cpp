// `pipewright plan`: the table, --json, --out read back by `simulate --plan`, exports, and bad input
// (exit 2 and one line naming the option and the fix).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_test_util.hpp"
#include "core/units.hpp"
#include "../temp_folder.hpp"

namespace {

const std::vector<std::string> kSmall = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                                         "--global-batch-size", "16", "--seq-len", "1024", "--schedules",
                                         "1f1b,interleaved,zb-h1", "--top", "3"};

// Plan 1 of `plan_args --json --out path`, and the same plan simulated again from the file (`simulate --plan`).
struct Replayed {
  nlohmann::json best, again;
};
Replayed plan_then_simulate(const std::vector<std::string>& plan_args, const std::string& path) {
  std::filesystem::remove(path);
  const CliResult plan = run_cli(with(plan_args, {"--json", "--out", path}));
  INFO(plan.err);
  REQUIRE(plan.code == 0);
  const CliResult sim = run_cli({"simulate", "--plan", path, "--json"});
  INFO(sim.err);
  REQUIRE(sim.code == 0);
  return {nlohmann::json::parse(plan.out).at("plans")[0], nlohmann::json::parse(sim.out)};
}





}  // namespace

TEST_CASE("plan prints the best configurations as a table") {
  const CliResult r = run_cli(kSmall);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> all;
  while (std::getline(lines, line)) all.push_back(line);
  REQUIRE(all.size() > 7);
  CHECK(all[0] == "gpt3-1.3b on dgx-h100: 8 GPUs, global batch 16 sequences of 1024 tokens");
  CHECK(all[1].rfind("searched ", 0) == 0);
  CHECK(all[1].find("configurations; the 3 fastest that fit in 83.2 GB (84.9 GB less the 2% headroom) per GPU:") != std::string::npos);
  CHECK(all[3].rfind("  #  tp  cp   pp    dp  zero  vpp  mbs      m  schedule     recompute  split", 0) == 0);
  CHECK(all[4].rfind("  1 ", 0) == 0);
  CHECK(all[5].rfind("  2 ", 0) == 0);
  CHECK(all[6].rfind("  3 ", 0) == 0);
  CHECK(all[7].empty());
}

TEST_CASE("plan --json lists the plans best first") {
  const CliResult r = run_cli(with(kSmall, {"--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& plans = j.at("plans");
  REQUIRE(plans.size() == 3);
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& p = plans[i];
    for (const char* key : {"tp", "pp", "dp", "vpp", "micro_batch_size", "microbatches", "schedule", "recompute", "split",
                            "step_time_s", "throughput_tokens_per_s", "mfu", "peak_memory_bytes", "vs_uniform",
                            "vs_parameters"})
      CHECK(p.contains(key));
    // 8 GPUs, 16 sequences of 1024 tokens.
    CHECK(p.at("tp").get<int>() * p.at("pp").get<int>() * p.at("dp").get<int>() == 8);
    CHECK(p.at("micro_batch_size").get<int>() * p.at("microbatches").get<int>() * p.at("dp").get<int>() == 16);
    CHECK(p.at("throughput_tokens_per_s").get<double>() == Approx(16 * 1024 / p.at("step_time_s").get<double>()));
    // By step time, but for near ties of the fastest (within 1%), which rank by depth and memory first.
    const double fastest = plans[0].at("step_time_s").get<double>();
    if (i > 0 && plans[i - 1].at("step_time_s").get<double>() > fastest * 1.01)
      CHECK(plans[i - 1].at("step_time_s").get<double>() <= p.at("step_time_s").get<double>());
  }
}

TEST_CASE("plan --explain breaks the best step down, names what binds it and what each runner-up loses") {
  const CliResult text = run_cli(with(kSmall, {"--explain"}));
  INFO(text.err);
  REQUIRE(text.code == 0);
  const size_t why = text.out.find("\nwhy plan 1: its step of ");
  REQUIRE(why != std::string::npos);
  for (const char* part : {"\n  compute ", "\n  recompute ", "\n  tp ", "\n  cp ", "\n  ep ", "\n  pp ", "\n  dp ",
                           "\n  optimizer ", "\n  idle ", "\nbinds: ", "\nrunners-up against plan 1:\n  #2 +",
                           "\n  #3 +"})
    CHECK(text.out.find(part, why) != std::string::npos);

  const CliResult r = run_cli(with(kSmall, {"--explain", "--json"}));
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& e = j.at("explain");
  double sum = 0;
  for (const auto& [key, value] : e.at("breakdown").items()) sum += value.get<double>();
  CHECK(e.at("breakdown").size() == 10);
  CHECK(e.at("breakdown").at("host_s").get<double>() == 0);  // a dense model: its host runs ahead
  CHECK(sum == Approx(j.at("plans")[0].at("step_time_s").get<double>()).epsilon(1e-12));
  CHECK(e.at("step_time_s").get<double>() == j.at("plans")[0].at("step_time_s").get<double>());
  // One bubble: the table's, the ranks' mean; the breakdown's idle is the busiest rank's own and no more than it.
  CHECK(e.at("bubble_fraction").get<double>() == j.at("plans")[0].at("bubble_fraction").get<double>());
  CHECK(e.at("breakdown").at("idle_s").get<double>() <=
        e.at("bubble_fraction").get<double>() * e.at("step_time_s").get<double>() + 1e-12);
  REQUIRE(e.at("runners_up").size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& u = e.at("runners_up")[i];
    CHECK(u.at("plan").get<int>() == static_cast<int>(i) + 2);
    CHECK(u.at("loss_s").get<double>() ==
          j.at("plans")[i + 1].at("step_time_s").get<double>() - j.at("plans")[0].at("step_time_s").get<double>());
  }
  // With pipeline ranks, the text says the table's bubble is their mean.
  const CliResult deep = run_cli(with(kSmall, {"--pp", "2", "--explain"}));
  const CliResult deep_json = run_cli(with(kSmall, {"--pp", "2", "--explain", "--json"}));
  REQUIRE(deep_json.code == 0);
  const double bubble = nlohmann::json::parse(deep_json.out).at("plans")[0].at("bubble_fraction").get<double>();
  CHECK(deep.out.find("the plan's bubble, " + pw::format_percent(bubble) + ", is the mean over its 2 pipeline ranks)") !=
        std::string::npos);
  // Without --explain, no explanation.
  CHECK(!nlohmann::json::parse(run_cli(with(kSmall, {"--json"})).out).contains("explain"));
}

TEST_CASE("plan keeps the memory headroom free and bounds the pipeline depth, as asked") {
  const CliResult roomy = run_cli(with(kSmall, {"--memory-headroom", "5%"}));
  INFO(roomy.err);
  REQUIRE(roomy.code == 0);
  CHECK(roomy.out.find("the 3 fastest that fit in 80.7 GB (84.9 GB less the 5% headroom) per GPU:") != std::string::npos);
  // Each plan of a --json answer, the document kept alive while they are walked.
  const auto plans_of = [](const CliResult& r) { return nlohmann::json::parse(r.out).at("plans"); };
  const CliResult whole = run_cli(with(kSmall, {"--memory-headroom", "0%"}));
  REQUIRE(whole.code == 0);
  CHECK(whole.out.find("the 3 fastest that fit in 84.9 GB per GPU:") != std::string::npos);
  // pp at most 2: every plan listed holds to it.
  const CliResult shallow = run_cli(with(kSmall, {"--max-pp", "2", "--json"}));
  REQUIRE(shallow.code == 0);
  for (const auto& p : plans_of(shallow)) CHECK(p.at("pp").get<int>() <= 2);
  for (const char* bad : {"5", "60%", "-1%", "x%", "%", "nan%"})
    check_bad_input(with(kSmall, {"--memory-headroom", bad}),
                    std::string("--memory-headroom: '") + bad +
                        "' is not a share of the GPU's memory; give a percentage from 0% to 50%, such as 5%");
  check_bad_input(with(kSmall, {"--max-pp", "0"}), "--max-pp: must be at least 1, got 0");
  // --top is bounded before the search: 2^31 - 1 plans kept would score every candidate (issue 37).
  std::vector<std::string> all_plans = kSmall;
  all_plans.back() = "2147483647";  // kSmall ends with --top 3
  check_bad_input(all_plans, "--top: at most 1000 plans, got 2147483647; ask for fewer");
  check_bad_input(with(kSmall, {"--min-layers-per-stage", "0"}), "--min-layers-per-stage: must be from 1 to 100000, got 0");
  // gpt3-1.3b has 24 blocks: 13 a rank leaves only pp 1, which 8 GPUs at tp 8 still allow; --pp 2 is the user's.
  const CliResult floor = run_cli(with(kSmall, {"--min-layers-per-stage", "13", "--json"}));
  REQUIRE(floor.code == 0);
  for (const auto& p : plans_of(floor)) CHECK(p.at("pp").get<int>() == 1);
  const CliResult fixed = run_cli(with(kSmall, {"--min-layers-per-stage", "13", "--pp", "2", "--json"}));
  REQUIRE(fixed.code == 0);
  for (const auto& p : plans_of(fixed)) CHECK(p.at("pp").get<int>() == 2);
  check_bad_input(with(kSmall, {"--max-pp", "2", "--pp", "4"}),
                  "--max-pp: no pipeline degree dividing 8 GPUs / (tp x cp) and equal to 4 is at most 2; relax it");
}

TEST_CASE("plan --explain says why plan 1 is as deep as it is") {
  // Fixed at pp 2: no shallower plan can be listed.
  const CliResult r = run_cli(with(kSmall, {"--pp", "2", "--explain", "--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& choice = j.at("explain").at("choice");
  REQUIRE(choice.size() == 2);
  CHECK(choice[0] == "depth: pp 2; no listed plan has fewer pipeline ranks (--max-pp 1 searches only those)");
  // A faster plan with more memory lost to plan 1 as a near tie; the plan table says how it ranks rows.
  const std::string preferred = choice[1].get<std::string>();
  CHECK(preferred.rfind("preferred: the fastest plan found, tp=1, pp=2, ", 0) == 0);
  CHECK(preferred.find("less; within 1.0% of it plan 1 has less peak memory (") != std::string::npos);
  const CliResult table = run_cli(with(kSmall, {"--pp", "2"}));
  CHECK(table.out.find("\nrows: plans within 1.0% of the fastest step come first, by fewer pipeline ranks, then less "
                       "peak\nmemory") != std::string::npos);
}

TEST_CASE("plan --out writes a plan that simulate --plan reproduces") {
  const std::string path = tmp("plan-cli.json");
  const auto [best, again] = plan_then_simulate(kSmall, path);
  CHECK(again.at("step_time_s").get<double>() == best.at("step_time_s").get<double>());
  CHECK(again.at("peak_memory_bytes").get<double>() == best.at("peak_memory_bytes").get<double>());
  CHECK(again.at("schedule") == best.at("schedule"));
  CHECK(again.at("tp") == best.at("tp"));
  CHECK(again.at("pp") == best.at("pp"));

  check_bad_input({"simulate", "--plan", path, "--tp", "2"},
              "--plan: the plan file gives the scenario; drop --tp (only --cost-param adds to a plan)");
}

TEST_CASE("plan --export writes the files and prints them") {
  const std::string dir = tmp("plan-export");
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/megatron_args.sh");
  const CliResult r = run_cli({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                               "--global-batch-size", "16", "--seq-len", "1024", "--schedules", "1f1b,interleaved",
                               "--top", "1", "--export", "megatron", "--export-dir", dir});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string text = file_contents(dir + "/megatron_args.sh");
  CHECK(text.find("PIPEWRIGHT_MEGATRON_ARGS=(") != std::string::npos);
  CHECK(r.out.find("--- " + dir + "/megatron_args.sh ---\n" + text) != std::string::npos);
}

TEST_CASE("plan --export torchtitan shards the state of a cp > 1 plan (ZeRO-3), as torchtitan does, and writes its three forms") {
  // torchtitan's FSDP mesh spans dp_shard x cp: a plan with cp 2 at ZeRO-0, the lowest level that fits, could not be
  // exported. The search takes cp > 1 at ZeRO-3 only, cp 1 at ZeRO 0 or 3.
  const std::string dir = tmp("plan-export-torchtitan-cp");
  std::filesystem::remove_all(dir);
  const CliResult r = run_cli({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--pp", "2", "--tp",
                               "2", "--global-batch-size", "64", "--json", "--export", "torchtitan", "--export-dir", dir});
  INFO(r.err);
  REQUIRE(r.code == 0);
  bool any_cp = false;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const nlohmann::json& plan : j["plans"]) {
    any_cp = any_cp || plan["cp"] > 1;
    CHECK((plan["cp"] == 1 || plan["zero"] == 3));
  }
  CHECK(any_cp);
  for (const char* name : {"pipewright_plan.py", "torchtitan_v0.2.2.toml", "pipewright_plan_v0_3_0.py"})
    CHECK(std::filesystem::is_regular_file(dir + "/" + name));
  check_bad_input({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--pp", "2", "--tp", "2", "--cp",
                   "2", "--zero", "0", "--global-batch-size", "64", "--schedule", "1f1b", "--recompute", "none",
                   "--export", "torchtitan", "--export-dir", dir},
                  "no configuration is valid; the first, tp=2, cp=2, pp=2, dp=2, micro-batch size 1, 1f1b and no recompute, "
                  "rank order tp-dp-pp, ZeRO-0, fails: the export target shards the model state over the 2 cp ranks (ZeRO-3 "
                  "or higher), not ZeRO-0");
}

TEST_CASE("plan: bad input is one line naming the option and the fix") {
  check_bad_input(with(kSmall, {"--export", "nemo"}), "--export: unknown target 'nemo'; use megatron, deepspeed or torchtitan");
  check_bad_input(with(kSmall, {"--export", "megatron"}),
              "--export megatron: it cannot run schedule zb-h1; use --schedules 1f1b,bfs,interleaved,interleaved-overlap");
  check_bad_input(with(kSmall, {"--threads", "-1"}), "--threads: must be 0 (all cores) or more, got -1");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
               "--top", "0"},
              "--top: must be at least 1, got 0");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
               "--schedules", "1f1b,,gpipe"},
              "--schedules: an empty name; list schedules such as 1f1b,interleaved");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
               "--export", "deepspeed", "--schedule", "interleaved"},
              "--export deepspeed: it cannot run schedule interleaved; use --schedules 1f1b");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
               "--export", "deepspeed", "--recompute", "selective"},
              "--export deepspeed: it has no selective recompute; use --recompute none or full");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "12", "--global-batch-size", "16",
               "--tp", "8"},
              "--gpus: 12 is not a multiple of --tp 8");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--global-batch-size", "16"},
              "--gpus is required");

  // The model file itself is not an output.
  const std::string model = std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-uniform.json";
  check_bad_input({"plan", "--model", model, "--cluster", "dgx-h100", "--gpus", "2", "--global-batch-size", "2", "--out",
               model},
              "--out: '" + model + "' is an input of this command (--model); write the output to another file");
}

TEST_CASE("plan: no configuration fits, and the message says by how much") {
  // tiny-uniform on two 20 MB GPUs with no reserve (planner/search_test.cpp derives the 104 MB).
  const std::string cluster = tmp("tiny-20mb.json");
  std::ofstream(cluster) << R"({"name": "tiny", "nodes": 1, "gpus_per_node": 2,
      "gpu": {"name": "20MB", "peak_tflops": 1, "memory_bytes": 2e7, "hbm_bytes_per_s": 1e12},
      "intra_node": {"bandwidth_bytes_per_s": 1e11, "latency_s": 0},
      "inter_node": {"bandwidth_bytes_per_s": 1e10, "latency_s": 0}})";
  check_bad_input({"plan", "--model", std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-uniform.json", "--cluster", cluster,
               "--gpus", "2", "--global-batch-size", "2", "--schedules", "1f1b,gpipe", "--cost-param",
               "memory_reserve_bytes=0"},
              "no configuration of 2 GPUs fits in memory: the smallest stage needs 104 MB with tp=1, pp=2, dp=1, "
              "micro-batch size 1, 1f1b and no recompute; a plan may use 19.6 MB (20.0 MB less the 2% headroom), 84.4 "
              "MB short; use more GPUs or GPUs with more memory, or a smaller --memory-headroom");
  check_bad_input({"plan", "--model", std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/tiny-uniform.json", "--cluster", cluster,
               "--gpus", "2", "--global-batch-size", "2", "--schedules", "1f1b,gpipe", "--cost-param",
               "memory_reserve_bytes=0", "--memory-headroom", "0%"},
              "no configuration of 2 GPUs fits in memory: the smallest stage needs 104 MB with tp=1, pp=2, dp=1, "
              "micro-batch size 1, 1f1b and no recompute; a plan may use 20.0 MB, 84.0 MB short; use more GPUs or GPUs "
              "with more memory");
}

TEST_CASE("plan: rank order and per-stage recompute can be fixed, and exports refuse what they cannot run") {
  const std::vector<std::string> base = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                                         "--global-batch-size", "16", "--seq-len", "1024", "--top", "3"};
  const CliResult fixed =
      run_cli(with(base, {"--rank-order", "tp-dp-pp", "--pp", "2", "--recompute", "per-stage", "--schedule", "1f1b", "--json"}));
  INFO(fixed.err);
  REQUIRE(fixed.code == 0);
  const nlohmann::json j = nlohmann::json::parse(fixed.out);
  for (const auto& p : j.at("plans")) {
    CHECK(p.at("rank_order") == "tp-dp-pp");
    CHECK(p.at("recompute") == "per-stage");
    CHECK(p.at("stage_recompute").size() == 2);
  }
  check_bad_input(with(kSmall, {"--rank-order", "pp-first"}),
              "--rank-order: 'pp-first' is not a rank order; use tp-pp-dp or tp-dp-pp");
  check_bad_input(with(base, {"--export", "deepspeed", "--rank-order", "tp-pp-dp", "--schedule", "1f1b"}),
              "--export deepspeed: it places ranks tp-dp-pp, not tp-pp-dp; use --rank-order tp-dp-pp");
  check_bad_input(with(base, {"--export", "megatron", "--recompute", "per-stage"}),
              "--export megatron: it has no per-stage recompute; use --recompute none, selective or full");
}

TEST_CASE("plan: a ZeRO level the export target cannot run is refused before the search") {
  check_bad_input(with(kSmall, {"--zero", "4"}), "--zero: must be 0, 1, 2 or 3, got 4");
  check_bad_input(with(kSmall, {"--zero", "2", "--no-distributed-optimizer"}),
              "--zero: 2 and --no-distributed-optimizer both set the sharding; give one of them");
  const std::vector<std::string> one_f = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                                         "--global-batch-size", "16", "--schedules", "1f1b"};
  check_bad_input(with(one_f, {"--zero", "3", "--export", "megatron"}),
              "--zero: 3 shards gradients and weights; Megatron-LM's distributed optimizer shards the optimizer state "
              "only (ZeRO-1); use --zero 0 or 1 with --export megatron");
  check_bad_input(with(kSmall, {"--zero", "2", "--export", "torchtitan"}),
              "--zero: torchtitan replicates the whole training state (data_parallel_replicate_degree) or shards "
              "weights, gradients and optimizer state together (FSDP), not ZeRO-2; use --zero 0 or 3 with --export "
              "torchtitan");
  check_bad_input(with(kSmall, {"--zero", "1", "--export", "torchtitan"}),
              "--zero: torchtitan replicates the whole training state (data_parallel_replicate_degree) or shards "
              "weights, gradients and optimizer state together (FSDP), not ZeRO-1; use --zero 0 or 3 with --export "
              "torchtitan");
  check_bad_input(with(one_f, {"--zero", "3", "--export", "deepspeed"}),
              "--zero: DeepSpeed's pipeline engine takes ZeRO stage 0 or 1, not 3; use --zero 0 or 1 with --export "
              "deepspeed");
  check_bad_input(with(kSmall, {"--reshard-after-forward", "sometimes"}),
              "--reshard-after-forward: unknown 'sometimes'; use default, always or never");
  check_bad_input(with(kSmall, {"--fsdp-grad-sync", "sometimes"}),
                  "--fsdp-grad-sync: unknown 'sometimes'; use default, every-microbatch or last-microbatch");
  check_bad_input(with(kSmall, {"--fsdp-grad-sync", "every-microbatch"}),
                  "--fsdp-grad-sync: every-microbatch applies to ZeRO-3 (FSDP), not ZeRO-1; add --zero 3 or leave it out");
  check_bad_input(with(kSmall, {"--zeros", "1,2", "--fsdp-grad-sync", "last-microbatch"}),
                  "--fsdp-grad-sync: last-microbatch applies to ZeRO-3 (FSDP), not ZeRO-1; add --zero 3 or leave it out");
  check_bad_input(with(kSmall, {"--zero", "3", "--fsdp-grad-sync", "every-microbatch", "--export", "torchtitan",
                                "--export-dir", PIPEWRIGHT_TEST_TMP}),
                  "--fsdp-grad-sync: torchtitan reduce-scatters FSDP gradients every micro-batch without pp and after "
                  "the last with pp, not every-microbatch; use --fsdp-grad-sync default with --export torchtitan");
}

TEST_CASE("plan refuses precision and ZeRO lists it cannot search as asked") {
  check_bad_input(with(kSmall, {"--precisions", "bf16,fp8", "--precision", "bf16"}),
              "--precisions: --precision fixes one and --precisions lists several; give one of them");
  check_bad_input(with(kSmall, {"--precisions", "bf16,fp8", "--export", "torchtitan", "--export-dir", PIPEWRIGHT_TEST_TMP}),
              "--precisions: --export torchtitan does not run fp8 as pipewright simulates it; leave it out");
  check_bad_input(with(kSmall, {"--zeros", "1,4"}), "--zeros: '4' is not a ZeRO level; list 0, 1, 2 or 3");
  check_bad_input(with(kSmall, {"--zeros", "1,3", "--zero", "1"}),
              "--zeros: --zero (or --[no-]distributed-optimizer) fixes one level and --zeros lists several; give one of "
              "them");
}

TEST_CASE("the README's plan (GPT-3 175B on 1024 A100s) exports to Megatron-LM, DeepSpeed and torchtitan") {
  // Each target's search keeps to what it runs: Megatron-LM any of its schedules, DeepSpeed 1f1b with the
  // reduction after the last backward, torchtitan ZeRO 0 or 3 (never Megatron's default ZeRO-1).
  const std::string root = std::string(PIPEWRIGHT_TEST_TMP) + "/readme-exports";
  std::filesystem::remove_all(root);
  const std::vector<std::pair<std::string, std::vector<std::string>>> targets = {
      {"megatron", {"megatron_args.sh"}},
      {"deepspeed", {"ds_config.json", "pipewright_partition.py"}},
      {"torchtitan", {"pipewright_plan.py", "torchtitan_v0.2.2.toml", "pipewright_plan_v0_3_0.py"}}};
  for (const auto& [target, names] : targets) {
    INFO(target);
    const std::string dir = root + "/" + target;
    const CliResult r = run_cli({"plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1024",
                                 "--global-batch-size", "1536", "--top", "1", "--json", "--export", target,
                                 "--export-dir", dir});
    INFO(r.err);
    REQUIRE(r.code == 0);
    for (const std::string& name : names) CHECK(std::filesystem::is_regular_file(dir + "/" + name));
    const nlohmann::json plan = nlohmann::json::parse(r.out)["plans"][0];
    if (target == "deepspeed") CHECK(plan["schedule"] == "1f1b");
    if (target == "torchtitan") CHECK((plan["zero"] == 0 || plan["zero"] == 3));
    if (target != "megatron") continue;
    // Every flag of the launch is one Megatron-LM d98e8a6's arguments.py accepts (tests/fixtures/megatron/).
    std::set<std::string> accepted;
    std::ifstream fixture(source_path("tests/fixtures/megatron/arguments.txt"));
    for (std::string line; std::getline(fixture, line);)
      if (line.rfind("--", 0) == 0) accepted.insert(line);
    REQUIRE(accepted.size() > 500);
    std::ifstream launch(dir + "/megatron_args.sh");
    int flags = 0;
    for (std::string line; std::getline(launch, line);) {
      if (line.rfind("  --", 0) != 0) continue;
      const std::string flag = line.substr(2, line.find(' ', 2) - 2);
      INFO(flag);
      CHECK(accepted.count(flag) == 1);
      ++flags;
    }
    CHECK(flags >= 19);  // the model, its layout, batch, precision and reduction
  }
}

TEST_CASE("plan --train-tokens: each plan's wall time, GPU-hours, cost, interruptions and goodput") {
  const std::vector<std::string> base = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                                         "--global-batch-size", "16", "--top", "2", "--train-tokens", "20B",
                                         "--gpu-hour-price", "2.5", "--mtbf-per-gpu", "10000"};
  const CliResult text = run_cli(base);
  INFO(text.err);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("time to train 20B tokens on 8 GPUs:\na failure every 416.7 days of GPU time (--mtbf-per-gpu), "
                      "so one every 52.1 days on all of them; a checkpoint takes 60 s to write, a restart 10.0 min:\n") !=
        std::string::npos);
  std::vector<std::string> json_args = base;
  json_args.push_back("--json");
  const CliResult j = run_cli(json_args);
  REQUIRE(j.code == 0);
  const nlohmann::json plans = nlohmann::json::parse(j.out)["plans"];
  REQUIRE(plans.size() == 2);
  for (const nlohmann::json& p : plans) {
    const nlohmann::json& run = p["training_run"];
    // The compute time is the tokens at the plan's throughput; the rest is Daly's model (core tests).
    CHECK(run["compute_s"].get<double>() == Approx(20e9 / p["throughput_tokens_per_s"].get<double>()).epsilon(1e-12));
    CHECK(run["wall_s"].get<double>() > run["compute_s"].get<double>());
    CHECK(run["cost"].get<double>() == Approx(run["gpu_hours"].get<double>() * 2.5).epsilon(1e-12));
    CHECK(run["gpu_hours"].get<double>() == Approx(run["wall_s"].get<double>() * 8 / 3600).epsilon(1e-12));
  }
  // Refused before the search, naming the option.
  check_bad_input({"plan", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "1000000", "--global-batch-size", "4096",
               "--train-tokens", "15Q"},
              "--train-tokens: '15Q' is not a token count; write a positive number with an optional K, M, B or T, such "
              "as 15T");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
               "--train-tokens", "1T", "--gpu-hour-price", "-2"},
              "--gpu-hour-price: must be from 0 to 1e+06 a GPU-hour, got -2");
  check_bad_input({"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
                   "--train-tokens", "1T", "--mtbf-per-gpu", "-5"},
                  "--mtbf-per-gpu: must be 0 (no failures) or from 1 to 1e+09 hours, got -5");
}

TEST_CASE("simulate measures a plan against what the headroom leaves of each GPU") {
  // Llama 3 405B as Meta ran it on 16,384 H100s (tp 8, pp 16, dp 128, vpp 2) needs 90.9 GB on rank 1 as
  // simulated with PyTorch pipelining's FSDP (whole fp32 gradients until the last micro-batch): over the 83.2
  // GB a plan may use of the 84.9 GB CUDA gives a process by default, and still over with no headroom.
  const std::vector<std::string> meta = {"simulate", "--model", "llama3-405b", "--cluster", "dgx-h100", "--tp", "8",
                                         "--pp", "16", "--dp", "128", "--vpp", "2", "--microbatches", "16",
                                         "--seq-len", "8192", "--schedule", "interleaved", "--zero", "3",
                                         "--reshard-after-forward", "never"};
  const CliResult r = run_cli(meta);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("  peak memory             90.9 GB of 83.2 GB (84.9 GB less the 2% headroom)\n") != std::string::npos);
  CHECK(r.out.find("  does not fit: rank 1 needs 90.9 GB, 7.70 GB more than the 83.2 GB (84.9 GB less the 2% headroom) "
                   "it may use") != std::string::npos);
  const CliResult whole = run_cli(with(meta, {"--memory-headroom", "0%"}));
  REQUIRE(whole.code == 0);
  CHECK(whole.out.find("  peak memory             90.9 GB of 84.9 GB\n") != std::string::npos);
  CHECK(whole.out.find("  does not fit: rank 1 needs 90.9 GB, 6.00 GB more than the 84.9 GB it may use") != std::string::npos);
  // With every micro-batch's gradients reduce-scattered into fp32 shards (the paper's FSDP read literally) the
  // whole gradients' 12.8 GB go and one block's 1.6 GB of gradient is working memory: it fits, at the price
  // of 16 reduce-scatters a step the backward cannot hide.
  const CliResult sharded = run_cli(with(meta, {"--fsdp-grad-sync", "every-microbatch"}));
  REQUIRE(sharded.code == 0);
  CHECK(sharded.out.find("  peak memory             79.9 GB of 83.2 GB (84.9 GB less the 2% headroom)\n") != std::string::npos);
  CHECK(sharded.out.find("does not fit") == std::string::npos);
  CHECK(sharded.out.find("  model FLOP/s per GPU    300.1 TFLOP/s\n") != std::string::npos);
  // With a backward that keeps every GEMM's and the attention's output and rebuilds the norms' and the SwiGLU's
  // (LLaMA's hand-written one, the validation's reading) a block keeps a third less: it fits with 14.6 GB to
  // spare, for 0.5% of the step spent rebuilding them.
  const CliResult elementwise = run_cli(with(meta, {"--recompute", "selective", "--recompute-modules", "elementwise"}));
  REQUIRE(elementwise.code == 0);
  CHECK(elementwise.out.find("  peak memory             68.6 GB of 83.2 GB (84.9 GB less the 2% headroom)\n") !=
        std::string::npos);
  CHECK(elementwise.out.find("does not fit") == std::string::npos);
  CHECK(elementwise.out.find("  model FLOP/s per GPU    367.6 TFLOP/s\n") != std::string::npos);
}

TEST_CASE("plan lists a precision column when the listed plans differ in precision, and none when they agree") {
  const std::vector<std::string> fixed = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                                          "--global-batch-size", "16", "--seq-len", "1024", "--tp", "1", "--pp", "1",
                                          "--micro-batch-size", "2", "--recompute", "none"};
  const CliResult mixed = run_cli(with(fixed, {"--precisions", "bf16,fp8"}));
  REQUIRE(mixed.code == 0);
  CHECK(mixed.out.find("  m  precision  schedule ") != std::string::npos);
  CHECK(mixed.out.find("      1  fp8        1f1b") != std::string::npos);
  CHECK(mixed.out.find("      1  bf16       1f1b") != std::string::npos);
  const CliResult one = run_cli(with(fixed, {"--precisions", "fp8"}));
  REQUIRE(one.code == 0);
  CHECK(one.out.find("precision") == std::string::npos);
  CHECK(one.out.find("sequences of 1024 tokens, fp8\n") != std::string::npos);
}

TEST_CASE("plan names the GPU without fp8 and the global batches the GPUs allow") {
  check_bad_input({"plan", "--model", "llama3-8b", "--cluster", "dgx-a100-80gb", "--gpus", "64", "--global-batch-size",
                   "128", "--precisions", "bf16,fp8"},
                  "--precisions: fp8 needs the GPU's dense fp8 peak; 'A100 SXM 80GB' of cluster 'dgx-a100-80gb' has none "
                  "(no fp8 tensor cores, or fp8_peak_tflops not given); leave fp8 out, or plan on GPUs that have it (H100, "
                  "H200, B200)");
  check_bad_input({"plan", "--model", "llama3-8b", "--cluster", "dgx-a100-80gb", "--gpus", "64", "--global-batch-size",
                   "128", "--precision", "fp8"},
                  "--precision: fp8 needs the GPU's dense fp8 peak; 'A100 SXM 80GB' of cluster 'dgx-a100-80gb' has none "
                  "(no fp8 tensor cores, or fp8_peak_tflops not given); plan with bf16, or on GPUs that have it (H100, "
                  "H200, B200)");
  // 1000 GPUs as tp (up to 8) x pp (up to 16, two of llama3-8b's 32 layers each) x dp: dp is 25 or a multiple.
  check_bad_input({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "1000", "--global-batch-size", "128"},
                  "--global-batch-size: 128 is not a multiple of any data-parallel degree 1000 GPUs allow (25, 50, 100, "
                  "125, 200, 250, 500, 1000); use 125 or 150");
}

TEST_CASE("plan --export says what the target's limits ruled out and what that cost") {
  const std::vector<std::string> small = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "32",
                                          "--global-batch-size", "64", "--seq-len", "1024", "--top", "1", "--export",
                                          "deepspeed", "--export-dir", tmp("export-limit")};
  const CliResult r = run_cli(with(small, {"--json"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& limit = j.at("export_limit");
  CHECK(limit.at("target") == "deepspeed");
  REQUIRE(limit.contains("fastest_outside"));
  // DeepSpeed's pipeline engine runs 1f1b-like schedules only: the faster plan outside runs bfs.
  CHECK(limit.at("why") == "DeepSpeed has no bfs schedule");
  CHECK(limit.at("fastest_outside").get<std::string>().find("bfs") != std::string::npos);
  CHECK(limit.at("gain").get<double>() ==
        Approx(1 - limit.at("step_time_s").get<double>() / j.at("plans")[0].at("step_time_s").get<double>()).epsilon(1e-12));
  CHECK(limit.at("gain").get<double>() > 0);
  const CliResult text = run_cli(small);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("\n--export deepspeed: the search kept to what DeepSpeed runs; it ruled out tp=1, pp=2") !=
        std::string::npos);

  // Asked for schedules the target runs, nothing outside is faster.
  const CliResult kept = run_cli(with(small, {"--schedules", "1f1b"}));
  REQUIRE(kept.code == 0);
  CHECK(kept.out.find("\n--export deepspeed: the search kept to what DeepSpeed runs; that cost nothing, no plan outside "
                      "it is faster\n") != std::string::npos);
}

TEST_CASE("plan searches dualpipe when asked: one copy's split, a plan file simulate reproduces, exports refuse it") {
  const std::vector<std::string> dualpipe = {"plan", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "8",
                                             "--global-batch-size", "16", "--seq-len", "1024", "--schedules", "dualpipe",
                                             "--top", "2"};
  const auto [best, again] = plan_then_simulate(dualpipe, tmp("plan-cli-dualpipe.json"));
  CHECK(best.at("schedule") == "dualpipe");
  // Two copies of the model's pp parts: the split lists the pp parts, as --split takes them, covering the model.
  const int pp = best.at("pp");
  REQUIRE(best.at("layer_ranges").size() == static_cast<size_t>(pp));
  CHECK(best.at("layer_ranges")[0][0] == 0);
  CHECK(best.at("split").size() == static_cast<size_t>(pp));
  CHECK(again.at("step_time_s").get<double>() == best.at("step_time_s").get<double>());
  CHECK(again.at("peak_memory_bytes").get<double>() == best.at("peak_memory_bytes").get<double>());
  // --explain splits the step of the busiest rank, each stage counting its copy's micro-batches.
  const CliResult explained = run_cli(with(dualpipe, {"--explain"}));
  INFO(explained.err);
  REQUIRE(explained.code == 0);
  CHECK(explained.out.find("why plan 1: its step of ") != std::string::npos);
  check_bad_input(with(dualpipe, {"--export", "megatron", "--export-dir", tmp("plan-dualpipe-export")}),
                  "--export megatron: it cannot run schedule dualpipe; use --schedules 1f1b,bfs,interleaved,interleaved-overlap");
}
