// Mixtures of experts on the command line: simulate reports the all-to-all's share, plan --json names ep and
// etp per plan, models --show --json gives total and active counts, and bad expert settings exit 2 with one
// line naming the option.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fstream>

#include "cli_test_util.hpp"

TEST_CASE("simulate --ep reports the expert all-to-all and its share of the step") {
  const CliResult r = run_cli({"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--pp", "4", "--dp", "8",
                               "--ep", "8", "--global-batch-size", "256", "--rank-order", "tp-dp-pp", "--json"});
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("ep") == 8);
  CHECK(j.at("etp") == 1);
  const double a2a = j.at("expert_all_to_all_s").get<double>();
  CHECK(a2a > 0);
  CHECK(a2a < j.at("step_time_s").get<double>());
  const CliResult text = run_cli({"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--pp", "4", "--dp",
                                  "8", "--ep", "8", "--global-batch-size", "256", "--rank-order", "tp-dp-pp"});
  REQUIRE(text.code == 0);
  CHECK(text.out.find("  expert all-to-all       ") != std::string::npos);
  CHECK(text.out.find("of the step; ep 8)") != std::string::npos);
}

TEST_CASE("the all-to-alls' SM share slows the compute of F&B composites, and nothing else") {
  const auto step = [](const std::string& schedule, const std::string& share) {
    const CliResult r = run_cli({"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--pp", "2", "--dp",
                                 "8", "--ep", "8", "--vpp", "2", "--schedule", schedule, "--microbatches", "8",
                                 "--rank-order", "tp-dp-pp", "--cost-param", "all_to_all_sm_share=" + share, "--json"});
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out).at("step_time_s").get<double>();
  };
  CHECK(step("interleaved-overlap", "0.5") > step("interleaved-overlap", "0"));
  CHECK(step("interleaved", "0.5") == step("interleaved", "0"));
  const CliResult bad = run_cli({"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--pp", "2", "--dp",
                                 "8", "--ep", "8", "--microbatches", "8", "--cost-param", "all_to_all_sm_share=1"});
  CHECK(bad.code == 2);
  CHECK(bad.err ==
        "error: cost model: all_to_all_sm_share = 1 is not in [0, 1); give the share of the GPU's SMs an expert "
        "all-to-all holds (0.15: 20 of 132)\n");
}

TEST_CASE("simulate reports the time the GPU waits for the host to issue MoE blocks") {
  // Qwen3-30B-A3B at one 4096-token sequence per micro-batch: its blocks' GPU time is below the 9 ms the host
  // takes to issue one (docs/validation.md); Mixtral's 8 wide experts keep the GPU the slower.
  const std::vector<std::string> qwen = {"simulate", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--dp", "16",
                                         "--ep", "16", "--global-batch-size", "1024", "--rank-order", "tp-dp-pp",
                                         "--precision", "fp8", "--dispatcher", "flex"};
  auto json_of = [](std::vector<std::string> args) {
    args.push_back("--json");
    const CliResult r = run_cli(args);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  const nlohmann::json host_bound = json_of(qwen);
  const double wait = host_bound.at("host_wait_s").get<double>();
  CHECK(wait > 0);
  CHECK(wait < host_bound.at("step_time_s").get<double>());
  std::vector<std::string> no_floor = qwen;
  no_floor.insert(no_floor.end(), {"--cost-param", "moe_host_s=0"});
  const nlohmann::json gpu_only = json_of(no_floor);
  CHECK(gpu_only.at("host_wait_s").get<double>() == 0);
  // One rank, no bubble to absorb it: the floor lengthens the step by nearly all of its wait.
  const double longer = host_bound.at("step_time_s").get<double>() - gpu_only.at("step_time_s").get<double>();
  CHECK(longer > 0.95 * wait);
  CHECK(longer <= wait + 1e-9);
  const CliResult text = run_cli(qwen);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("  waiting on the host     ") != std::string::npos);
  CHECK(text.out.find("of the step: its MoE blocks issued slower than they run; larger micro-batches amortize it)") !=
        std::string::npos);
  const CliResult mixtral = run_cli({"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--pp", "4", "--dp",
                                     "8", "--ep", "8", "--global-batch-size", "256", "--rank-order", "tp-dp-pp"});
  REQUIRE(mixtral.code == 0);
  CHECK(mixtral.out.find("waiting on the host") == std::string::npos);
}

TEST_CASE("run predicts its own executor without Megatron's host floor, unless --cost-param sets one") {
  // The executor issues an MoE block from C++: moe_host_s, Megatron-Core's eager host time, defaults to 0 here.
  const std::vector<std::string> base{"run", "--model", source_path("examples/tiny-moe.json"), "--cluster", "ideal",
                                      "--pp", "1", "--dp", "2", "--ep", "2", "--microbatches", "4", "--micro-batch-size",
                                      "2", "--iterations", "1", "--warmup", "0", "--no-profile", "--json"};
  auto predicted = [&](const std::vector<std::string>& more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    const CliResult r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out).at("predicted_step_time_s").get<double>();
  };
  const double own = predicted({});
  CHECK(own == predicted({"--cost-param", "moe_host_s=0"}));
  // 3 MoE blocks x 4 micro-batches x 9 ms, on the GPU-fast ideal cluster: the floor sets the pace.
  CHECK(predicted({"--cost-param", "moe_host_s=0.009"}) > own + 3 * 4 * 0.009 * 0.9);
}

TEST_CASE("plan --json names ep and etp per plan, and models --show --json the total and active counts") {
  const CliResult r = run_cli({"plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "16",
                               "--global-batch-size", "64", "--top", "2", "--json", "--schedules", "1f1b"});
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const nlohmann::json& p : j.at("plans")) {
    const int ep = p.at("ep"), etp = p.at("etp"), tp = p.at("tp"), dp = p.at("dp");
    CHECK(8 % ep == 0);
    CHECK(tp * dp % (ep * etp) == 0);
  }
  const CliResult shown = run_cli({"models", "--show", source_path("examples/deepseek-v3.config.json"), "--json"});
  REQUIRE(shown.code == 0);
  const nlohmann::json m = nlohmann::json::parse(shown.out);
  CHECK(m.at("total_parameters").get<std::int64_t>() == 671026404352);
  CHECK(m.at("active_parameters").get<std::int64_t>() == 37552282624);
}

TEST_CASE("bad expert settings: one line naming the option, exit 2") {
  const auto error = [](std::vector<std::string> args) {
    const CliResult r = run_cli(args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    return r.err;
  };
  CHECK(error({"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--dp", "6", "--ep", "3",
               "--microbatches", "2"}) ==
        "error: --ep: 3 does not divide the 8 routed experts of 'mixtral-8x7b'; use a divisor of 8\n");
  CHECK(error({"simulate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--dp", "2", "--ep", "2", "--microbatches",
               "2"}) ==
        "error: --ep: model 'llama3-8b' has no routed experts to spread; use --ep 1 --etp 1 or a mixture-of-experts "
        "model\n");
  CHECK(error({"plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
               "--export", "deepspeed"}) ==
        "error: --export deepspeed: model 'mixtral-8x7b' has routed experts, which DeepSpeed's pipeline engine "
        "(PipelineModule) does not run with expert parallelism; use --export megatron or torchtitan\n");
  CHECK(error({"plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch-size", "16",
               "--ep", "16"}) ==
        "error: --ep: no expert-parallel degree equal to 16 divides both the 8 routed experts of 'mixtral-8x7b' and the "
        "tp x cp x dp GPUs of a stage with etp 1; give an --ep dividing 8 and those GPUs\n");
}

TEST_CASE("simulate --trace puts each action's all-to-alls on a lane of their own") {
  const std::string path = std::string(PIPEWRIGHT_TEST_TMP) + "/moe_trace.json";
  const auto trace_of = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--trace", path});
    REQUIRE(run_cli(args).code == 0);
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  };
  const nlohmann::json t = trace_of({"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--pp", "2",
                                     "--dp", "8", "--ep", "8", "--vpp", "2", "--schedule", "interleaved-overlap",
                                     "--microbatches", "4", "--rank-order", "tp-dp-pp"});
  int named = 0, all_to_all = 0, composites = 0, compute = 0;
  for (const nlohmann::json& e : t.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("args").at("name") == "all-to-all") ++named;
    compute += e.value("cat", "") == "compute" ? 1 : 0;
    if (e.value("cat", "") != "all-to-all") continue;
    ++all_to_all;
    CHECK(e.at("tid") == 5);
    CHECK(e.at("dur").get<double>() > 0);
    composites += e.at("args").at("op") == "FB" ? 1 : 0;
  }
  CHECK(named == 2);  // one lane per rank
  // Every stage holds MoE blocks, so every compute action has its all-to-all event, composites included.
  CHECK(all_to_all == compute);
  CHECK(composites > 0);
  const nlohmann::json dense = trace_of({"simulate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--pp", "2",
                                         "--microbatches", "4"});
  for (const nlohmann::json& e : dense.at("traceEvents")) {
    CHECK(e.value("cat", "") != "all-to-all");
    if (e.at("ph") == "M" && e.at("name") == "thread_name") CHECK(e.at("args").at("name") != "all-to-all");
  }
}

TEST_CASE("recompute modules on the command line: shown, planned and refused") {
  const std::vector<std::string> oss = {"simulate", "--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--pp", "4",
                                        "--dp", "16", "--ep", "8", "--global-batch-size", "1280", "--rank-order",
                                        "tp-dp-pp", "--split", "9,9,9,9"};
  const CliResult text = run_cli(with(oss, {"--recompute", "selective", "--recompute-modules", "layernorm,moe_act"}));
  REQUIRE(text.code == 0);
  CHECK(text.out.find(", recompute selective: moe_act, layernorm, flash attention\n") != std::string::npos);
  const CliResult dropped = run_cli(with(oss, {"--recompute", "selective", "--recompute-modules", "layernorm,moe_act", "--json"}));
  const CliResult kept = run_cli(with(oss, {"--json"}));
  REQUIRE(dropped.code == 0);
  REQUIRE(kept.code == 0);
  const nlohmann::json d = nlohmann::json::parse(dropped.out), k = nlohmann::json::parse(kept.out);
  CHECK(d.at("recompute_modules") == nlohmann::json{"moe_act", "layernorm"});
  CHECK(k.at("recompute_modules") == nlohmann::json{"core_attn"});
  // Less stored, more time in B.
  CHECK(d.at("peak_memory_bytes").get<double>() < k.at("peak_memory_bytes").get<double>());
  CHECK(d.at("step_time_s").get<double>() > k.at("step_time_s").get<double>());

  check_bad_input(with(oss, {"--recompute-modules", "moe_act"}),
                  "--recompute-modules: the modules are what selective recomputation reruns; add --recompute selective "
                  "(or a selective level in --stage-recompute)");
  check_bad_input(with(oss, {"--recompute", "selective", "--recompute-modules", "mla_up_proj"}),
                  "--recompute-modules: mla_up_proj reruns multi-head latent attention's up projections, which "
                  "'gpt-oss-120b' does not have; leave mla_up_proj out");
  check_bad_input(with(oss, {"--recompute", "selective", "--recompute-modules", "moe"}),
                  "--recompute-modules: moe is a Megatron module pipewright does not model; give core_attn, moe_act, "
                  "layernorm, mla_up_proj, mlp, shared_experts or elementwise");

  // bf16 gradients: less model state, half the bytes reduced.
  const CliResult bf16 = run_cli(with(oss, {"--grad-reduce-in-bf16", "--json"}));
  REQUIRE(bf16.code == 0);
  const nlohmann::json b = nlohmann::json::parse(bf16.out);
  CHECK(b.at("grad_reduce_in_bf16") == true);
  CHECK(k.at("grad_reduce_in_bf16") == false);
  CHECK(b.at("peak_memory_bytes").get<double>() < k.at("peak_memory_bytes").get<double>());
  CHECK(b.at("exposed_dp_comm_s").get<double>() < k.at("exposed_dp_comm_s").get<double>());
  const CliResult bf16_text = run_cli(with(oss, {"--grad-reduce-in-bf16"}));
  CHECK(bf16_text.out.find("of the step; ZeRO-1, bf16 gradients, buckets overlapped with the last backward)") !=
        std::string::npos);

  // plan: with fused attention, selective recomputation of the attention core alone is left out as none's twin;
  // with other modules it is searched.
  const std::vector<std::string> plan = {"plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "16",
                                         "--global-batch-size", "64", "--pp", "2", "--ep", "8", "--vpp", "1",
                                         "--micro-batch-size", "1", "--schedule", "1f1b", "--json"};
  const auto searched = [](const CliResult& r) {
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out).at("configurations").get<long>();
  };
  const long plain = searched(run_cli(plan));
  const long with_modules = searched(run_cli(with(plan, {"--recompute-modules", "moe_act"})));
  CHECK(with_modules > plain);
  check_bad_input(with(plan, {"--recompute", "full", "--recompute-modules", "moe_act"}),
                  "--recompute-modules: the modules are what selective recomputation reruns, which --recompute full "
                  "leaves out; plan with --recompute selective or without --recompute");
  check_bad_input(with(plan, {"--recompute-modules", "moe_act", "--export", "torchtitan"}),
                  "--recompute-modules: --export torchtitan has no selective recomputation for the modules to rerun; "
                  "leave --recompute-modules out");
}

TEST_CASE("plan finds DeepSeek-V3 on 2048 H800s a plan that fits and is as fast as DeepSeek's own configuration") {
  // The report's settings (fp8, the flex dispatcher, its recomputed modules, bf16 Adam moments), ep searched up
  // to 64. DeepSeek's own degrees and schedule (tp 1, pp 16, dp 128, ep 64 over 8 nodes, bidirectional DualPipe)
  // are the reference: plan 1 must fit and be no more than 10% slower (issue 34).
  const std::vector<std::string> report = {"--model", "deepseek-v3", "--cluster", "dgx-h800", "--global-batch-size",
                                           "15360", "--precision", "fp8", "--dispatcher", "flex",
                                           "--recompute-modules", "layernorm,mla_up_proj,moe_act",
                                           "--precision-aware-optimizer", "--exp-avg-dtype", "bf16",
                                           "--exp-avg-sq-dtype", "bf16", "--json"};
  std::vector<std::string> own = {"simulate", "--tp", "1", "--pp", "16", "--dp", "128", "--ep", "64", "--schedule",
                                  "dualpipe", "--rank-order", "tp-dp-pp", "--recompute", "selective"};
  own.insert(own.end(), report.begin(), report.end());
  const CliResult deepseek = run_cli(own);
  INFO(deepseek.err);
  REQUIRE(deepseek.code == 0);
  const double reference = nlohmann::json::parse(deepseek.out).at("step_time_s").get<double>();
  std::vector<std::string> search = {"plan", "--gpus", "2048", "--max-ep", "64", "--top", "1"};
  search.insert(search.end(), report.begin(), report.end());
  const CliResult r = run_cli(search);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json best = nlohmann::json::parse(r.out).at("plans").at(0);
  CHECK(best.at("step_time_s").get<double>() <= 1.10 * reference);
  CHECK(best.at("peak_memory_bytes").get<double>() <= 80e9 * (1 - 0.02));
}

TEST_CASE("simulate names the rank order that keeps an ep group in fewer nodes") {
  // Mixtral on 32 H100s, pp 4, dp 8, ep 8: with pipeline neighbours in a node (tp-pp-dp) the 8 dp replicas of a
  // stage sit 4 GPUs apart, over 4 nodes; tp-dp-pp puts them in one.
  const std::vector<std::string> args = {"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--pp", "4",
                                         "--dp", "8", "--ep", "8", "--global-batch-size", "256"};
  const CliResult spread = run_cli(args);
  REQUIRE(spread.code == 0);
  CHECK(spread.out.find("\n                          note: rank order tp-pp-dp spreads ep 8 over 4 nodes; --rank-order "
                        "tp-dp-pp keeps it in 1 (Megatron-Core's order, tp-cp-ep-dp-pp)\n") != std::string::npos);
  const CliResult packed = run_cli(with(args, {"--rank-order", "tp-dp-pp"}));
  REQUIRE(packed.code == 0);
  CHECK(packed.out.find("note: rank order") == std::string::npos);
}
