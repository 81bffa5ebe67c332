// The plan file (docs/plan-format.md): written from a plan and read back, it gives the same scenario and,
// simulated again, the same metrics; bad files are named with the field and the fix.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "planner/plan_file.hpp"
#include "planner/search.hpp"

using namespace pw;

namespace {

// A plan with an uneven split: gpt3-1.3b (26 layers) on two H100 nodes, tp 2, pp 2, dp 4, vpp 2.
Evaluation sample_plan(const std::string& schedule, int vpp, const CostModel& cost) {
  Scenario s;
  s.model = model_preset("gpt3-1.3b");
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.tp = 2;
  s.parallel.pp = 2;
  s.parallel.dp = 4;
  s.parallel.vpp = vpp;
  s.schedule = schedule;
  s.global_batch_size = 32;
  s.workload.seq_len = 1024;
  s.workload.recompute = Recompute::Selective;
  const int stages = 2 * vpp;
  std::vector<int> blocks(static_cast<size_t>(stages), 24 / stages);
  blocks.front() -= 1;
  blocks.back() += 1;
  s.ranges = split_layers(s.model, stages, blocks);
  return evaluate(s, cost);
}

std::string error_of(const std::string& text) {
  try {
    plan_from_json_text(text, "p.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a plan file reads back to the same scenario and simulates to the same metrics") {
  const AnalyticCostModel cost;
  for (const auto& [schedule, vpp] : {std::pair<std::string, int>{"interleaved", 2}, {"zb-auto", 1}, {"1f1b", 1}}) {
    INFO(schedule);
    const Evaluation ev = sample_plan(schedule, vpp, cost);
    PlanExtras extras;
    extras.cost_overrides = {"gemm_efficiency=0.7"};
    const std::string text = plan_to_json_text(ev, extras);
    const PlanDocument doc = plan_from_json_text(text, "plan.json");
    const Scenario& s = doc.scenario;
    CHECK(s.model.name == "gpt3-1.3b");
    CHECK(s.cluster.name == "dgx-h100");
    CHECK(s.parallel.tp == 2);
    CHECK(s.parallel.pp == 2);
    CHECK(s.parallel.dp == 4);
    CHECK(s.parallel.vpp == vpp);
    CHECK(s.parallel.microbatches == ev.scenario.parallel.microbatches);
    CHECK(s.workload.micro_batch_size == 1);
    CHECK(s.workload.seq_len == 1024);
    CHECK(s.workload.recompute == Recompute::Selective);
    CHECK(s.global_batch_size == 32);
    CHECK(s.schedule == schedule);
    REQUIRE(s.ranges.size() == ev.stages.size());
    for (size_t i = 0; i < s.ranges.size(); ++i) {
      CHECK(s.ranges[i].first == ev.stages[i].layers.first);
      CHECK(s.ranges[i].last == ev.stages[i].layers.last);
    }
    CHECK(doc.schedule.ranks == ev.schedule.ranks);
    CHECK(doc.cost_overrides == std::vector<std::string>{"gemm_efficiency=0.7"});
    CHECK(doc.pipewright_version == kVersion);
    CHECK(doc.predicted.at("step_time_s").get<double>() == ev.metrics.step_time_s);

    // Simulated again from the file alone (its embedded model, cluster and action lists): the same numbers.
    const Evaluation again = evaluate(s, cost);
    CHECK(again.metrics.step_time_s == ev.metrics.step_time_s);
    CHECK(again.metrics.peak_memory_bytes == ev.metrics.peak_memory_bytes);
    CHECK(again.metrics.mfu == ev.metrics.mfu);
  }
}

TEST_CASE("the plan file holds the placement of every GPU and the format's header") {
  const AnalyticCostModel cost;
  const Evaluation ev = sample_plan("interleaved", 2, cost);
  const nlohmann::json j = nlohmann::json::parse(plan_to_json_text(ev, {}));
  CHECK(j.at("format") == "pipewright-plan");
  CHECK(j.at("version") == 1);
  // 16 GPUs, tp innermost, then pp, then dp; nodes of 8: global rank 13 is dp 3, pp 0, tp 1 on node 1, GPU 5.
  const auto& gpus = j.at("placement").at("gpus");
  REQUIRE(gpus.size() == 16);
  CHECK(gpus[13] == nlohmann::json{{"rank", 13}, {"node", 1}, {"gpu", 5}, {"tp", 1}, {"cp", 0}, {"pp", 0}, {"dp", 3}, {"ep", 0}, {"etp", 0}, {"expert_dp", 7}});
  CHECK(j.at("split").at("stages").size() == 4);
  CHECK(j.at("split").at("stages")[0].at("first_layer") == "embedding");
  CHECK(j.at("schedule").at("actions").at("format") == "pipewright-schedule");
}

TEST_CASE("bad plan files name the field and the fix") {
  CHECK(error_of("{\"format\": \"pipewright-plan\", ") ==
        "p.json: malformed JSON at byte 31: syntax error while parsing object key - unexpected end of input; expected "
        "string literal");
  CHECK(error_of("[1, 2]") == "p.json: a plan file holds one JSON object, got array");
  CHECK(error_of(R"({"format": "pipewright-schedule", "version": 1})") ==
        "p.json: format is \"pipewright-schedule\"; a plan file says \"pipewright-plan\" (write one with pipewright "
        "plan --out)");
  CHECK(error_of(R"({"format": "pipewright-plan", "version": 2})") ==
        std::string("p.json: version is 2; this pipewright reads version 1 (pipewright ") + kVersion + ")");

  const AnalyticCostModel cost;
  nlohmann::json j = nlohmann::json::parse(plan_to_json_text(sample_plan("1f1b", 1, cost), {}));
  j["colour"] = "blue";
  CHECK(error_of(j.dump()).rfind("p.json: unknown field 'colour'; known fields: format, version, ", 0) == 0);
  j.erase("colour");
  j["global_batch_size"] = 30;
  CHECK(error_of(j.dump()) == "p.json: global_batch_size is 30 but microbatches x micro_batch_size x dp = 32");
  j["global_batch_size"] = 32;
  j["split"]["stages"][0]["layers"] = "0-12";
  CHECK(error_of(j.dump()) == "p.json: split.stages[0].layers must be [first, last] layer indices, got \"0-12\"");
}

TEST_CASE("a plan file keeps per-stage recompute levels and the rank order") {
  const AnalyticCostModel cost;
  Scenario s;
  s.model = model_preset("gpt3-1.3b");
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.tp = 2;
  s.parallel.pp = 2;
  s.parallel.dp = 4;
  s.parallel.order = RankOrder::TpDpPp;
  s.global_batch_size = 32;
  s.workload.seq_len = 1024;
  s.stage_recompute = {Recompute::Full, Recompute::None};
  const Evaluation ev = evaluate(s, cost);
  const std::string text = plan_to_json_text(ev, PlanExtras{});
  const PlanDocument doc = plan_from_json_text(text, "plan.json");
  CHECK(doc.scenario.workload.recompute == Recompute::PerStage);
  CHECK(doc.scenario.stage_recompute == std::vector<Recompute>{Recompute::Full, Recompute::None});
  CHECK(doc.scenario.parallel.order == RankOrder::TpDpPp);
  // Rank 1 of replica 3 under tp-dp-pp sits at (pp_idx dp + dp_idx) tp = (1 x 4 + 3) x 2 = 14.
  const nlohmann::json j = nlohmann::json::parse(text);
  bool found = false;
  for (const auto& g : j.at("placement").at("gpus"))
    if (g.at("pp") == 1 && g.at("dp") == 3 && g.at("tp") == 0) found = g.at("rank") == 14;
  CHECK(found);
  CHECK(evaluate(doc.scenario, cost).metrics.step_time_s == ev.metrics.step_time_s);

  nlohmann::json missing = j;
  missing["workload"].erase("stage_recompute");
  CHECK(error_of(missing.dump()) ==
        "p.json: workload.stage_recompute is missing: recompute \"per-stage\" needs each stage's level");
}

TEST_CASE("a plan file keeps the modules selective recomputation reruns and bf16 gradients") {
  const AnalyticCostModel cost;
  Scenario s;
  s.model = model_preset("mixtral-8x7b");
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.pp = 2;
  s.parallel.dp = 8;
  s.parallel.ep = 8;
  s.parallel.order = RankOrder::TpDpPp;
  s.global_batch_size = 16;
  s.workload.recompute = Recompute::Selective;
  s.workload.recompute_modules = recompute_modules_from_string("layernorm,moe_act");
  const Evaluation ev = evaluate(s, cost);
  const std::string text = plan_to_json_text(ev, PlanExtras{});
  nlohmann::json j = nlohmann::json::parse(text);
  CHECK(j.at("workload").at("recompute_modules") == nlohmann::json{"moe_act", "layernorm"});
  const PlanDocument doc = plan_from_json_text(text, "plan.json");
  CHECK(doc.scenario.workload.recompute_modules == s.workload.recompute_modules);
  CHECK(evaluate(doc.scenario, cost).metrics.peak_memory_bytes == ev.metrics.peak_memory_bytes);
  CHECK_FALSE(doc.scenario.parallel.grad_reduce_in_bf16);
  Scenario bf16 = s;
  bf16.parallel.grad_reduce_in_bf16 = true;
  CHECK(plan_from_json_text(plan_to_json_text(evaluate(bf16, cost), PlanExtras{}), "plan.json").scenario.parallel.grad_reduce_in_bf16);
  // The SwiGLU inputs kept in fp8, and the memory they save, come back; files without the field keep them whole.
  CHECK_FALSE(doc.scenario.workload.activation_fp8_input_store);
  Scenario fp8_store = s;
  fp8_store.workload.activation_fp8_input_store = true;
  const Evaluation stored = evaluate(fp8_store, cost);
  const PlanDocument stored_doc = plan_from_json_text(plan_to_json_text(stored, PlanExtras{}), "plan.json");
  CHECK(stored_doc.scenario.workload.activation_fp8_input_store);
  CHECK(evaluate(stored_doc.scenario, cost).metrics.peak_memory_bytes == stored.metrics.peak_memory_bytes);
  CHECK(stored.metrics.peak_memory_bytes < ev.metrics.peak_memory_bytes);
  // Files written before the field existed rerun the attention core, Megatron's default.
  j["workload"].erase("recompute_modules");
  CHECK(plan_from_json_text(j.dump(), "plan.json").scenario.workload.recompute_modules.is_default());
  j["workload"]["recompute_modules"] = "moe_act";
  CHECK(error_of(j.dump()) ==
        "p.json: workload.recompute_modules must be a list of recompute module names, e.g. [\"core_attn\"]");
  j["workload"]["recompute_modules"] = {"moe"};
  CHECK(error_of(j.dump()) ==
        "p.json: workload.recompute_modules lists [\"moe\"]: moe is a Megatron module pipewright does not model; give "
        "core_attn, moe_act, layernorm, mla_up_proj, mlp, shared_experts or elementwise");
}

TEST_CASE("a plan file keeps context parallelism, hybrid sharding and the overlap settings") {
  const AnalyticCostModel cost;
  Scenario s;
  s.model = model_preset("llama3-8b");
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.tp = 2;
  s.parallel.cp = 2;
  s.parallel.pp = 2;
  s.parallel.dp = 4;
  s.parallel.zero = 3;
  s.parallel.dp_shard = 2;
  s.parallel.overlap_param_gather = false;
  s.global_batch_size = 16;
  const Evaluation ev = evaluate(s, cost);
  const std::string text = plan_to_json_text(ev, PlanExtras{});
  const PlanDocument doc = plan_from_json_text(text, "plan.json");
  const ParallelConfig& pc = doc.scenario.parallel;
  CHECK(pc.cp == 2);
  CHECK(doc.scenario.workload.cp == 2);
  CHECK(pc.zero == 3);
  CHECK(pc.dp_shard == 2);
  CHECK_FALSE(pc.overlap_param_gather);
  CHECK(nlohmann::json::parse(text).at("gpus") == 32);
  CHECK(evaluate(doc.scenario, cost).metrics.step_time_s == ev.metrics.step_time_s);
  // Under tp-pp-dp, tp innermost and cp next: (dp 1 x pp 2 + pp 1) x (tp x cp = 4) + cp 1 x tp 2 + tp 1 = 15.
  const nlohmann::json gpus = nlohmann::json::parse(text).at("placement").at("gpus");
  bool found = false;
  for (const auto& g : gpus)
    if (g.at("dp") == 1 && g.at("pp") == 1 && g.at("cp") == 1 && g.at("tp") == 1) found = g.at("rank") == 15;
  CHECK(found);
}

TEST_CASE("a plan file keeps the cores a cpu run's ranks share, and simulates them again") {
  const AnalyticCostModel cost;
  // pp 2, dp 4: 8 ranks; on 2 cores each replica's 2 ranks take turns on half of one.
  Scenario s = sample_plan("1f1b", 1, cost).scenario;
  const Evaluation alone = evaluate(s, cost);
  CHECK(nlohmann::json::parse(plan_to_json_text(alone, PlanExtras{})).count("shared_cores") == 0);
  s.shared_cores = {2, 3e-5};
  const Evaluation ev = evaluate(s, cost);
  CHECK(ev.metrics.step_time_s > alone.metrics.step_time_s);
  const std::string text = plan_to_json_text(ev, PlanExtras{});
  const PlanDocument doc = plan_from_json_text(text, "plan.json");
  CHECK(doc.scenario.shared_cores.cores == 2);
  CHECK(doc.scenario.shared_cores.wakeup_s == 3e-5);
  CHECK(evaluate(doc.scenario, cost).metrics.step_time_s == ev.metrics.step_time_s);
  CHECK_FALSE(doc.scenario.shared_cores.turns);
  CHECK(nlohmann::json::parse(text).at("shared_cores").count("turns") == 0);

  // Rank threads in turns (executor/core_turns.hpp): the turns and the hand-over kept too.
  s.shared_cores.turns = true;
  s.shared_cores.handover_s = 4e-6;
  const Evaluation turns = evaluate(s, cost);
  const PlanDocument turns_doc = plan_from_json_text(plan_to_json_text(turns, PlanExtras{}), "plan.json");
  CHECK(turns_doc.scenario.shared_cores.turns);
  CHECK(turns_doc.scenario.shared_cores.handover_s == 4e-6);
  CHECK(evaluate(turns_doc.scenario, cost).metrics.step_time_s == turns.metrics.step_time_s);

  nlohmann::json bad = nlohmann::json::parse(text);
  bad["shared_cores"]["cores"] = -1;
  CHECK(error_of(bad.dump()).rfind("p.json: shared_cores.cores ", 0) == 0);
  bad["shared_cores"] = {{"cores", 2}, {"wake", 1}};
  CHECK(error_of(bad.dump()) ==
        "p.json: unknown field 'shared_cores.wake'; known fields: cores, wakeup_s, turns, handover_s");
  bad["shared_cores"] = {{"cores", 2}, {"handover_s", -1}};
  CHECK(error_of(bad.dump()).rfind("p.json: shared_cores.handover_s ", 0) == 0);
}
