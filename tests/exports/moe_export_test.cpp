// MoE plans exported: Megatron-LM's MoE, MLA and MTP arguments (megatron/core/transformer/transformer_config.py
// fields, which megatron/training/arguments.py turns into flags; --moe-layer-freq as arguments.py's
// _eval_pattern reads it; the layout's m as pipeline_parallel_layer_layout.py reads it), torchtitan's
// expert_parallel_degree (torchtitan/distributed/parallel_dims.py), and DeepSpeed's refusal. Megatron-LM
// d98e8a6 and torchtitan b5bcd76 (both August 2026).
#include <catch2/catch.hpp>

#include <algorithm>

#include "../planner/planned.hpp"
#include "../error_text.hpp"
#include "exports/megatron.hpp"
#include "exports/torchtitan.hpp"
#include "exports/exports.hpp"
#include "schedules/generators.hpp"

using namespace pw;

namespace {

Evaluation moe_plan(const std::string& model, int tp, int pp, int dp, int ep, int global_batch, const std::vector<int>& blocks) {
  Scenario s = test::preset_scenario(model, tp, pp, dp, ep, global_batch);
  s.parallel.order = RankOrder::TpDpPp;
  return test::planned(s, blocks);
}

std::string after(const std::vector<std::string>& a, const std::string& flag) {
  const auto it = std::find(a.begin(), a.end(), flag);
  return it == a.end() ? "absent" : it + 1 == a.end() || (it + 1)->starts_with("--") ? "" : *(it + 1);
}

}  // namespace

TEST_CASE("Megatron-LM: DeepSeek-V3's experts, latent attention, MTP module and layout") {
  // pp 8: 7 + 8 x 6 + 6 blocks; the MTP module and the loss on the last stage with its 6 blocks.
  const Evaluation ev = moe_plan("deepseek-v3", 2, 8, 64, 64, 8192, {7, 8, 8, 8, 8, 8, 8, 6});
  const std::vector<std::string> a = megatron_arguments(ev);
  CHECK(after(a, "--num-experts") == "256");
  CHECK(after(a, "--moe-router-topk") == "8");
  CHECK(after(a, "--moe-ffn-hidden-size") == "2048");
  CHECK(after(a, "--moe-shared-expert-intermediate-size") == "2048");
  // 3 dense blocks then 58 MoE: a list, as an int k would make blocks 0, k, 2k... MoE.
  CHECK(after(a, "--moe-layer-freq") == "([0]*3+[1]*58)");
  CHECK(after(a, "--expert-model-parallel-size") == "64");
  CHECK(after(a, "--expert-tensor-parallel-size") == "1");  // explicit: Megatron's default is tp
  CHECK(after(a, "--moe-grouped-gemm").empty());
  CHECK(after(a, "--moe-token-dispatcher-type") == "alltoall");
  CHECK(after(a, "--moe-router-score-function") == "sigmoid");
  CHECK(after(a, "--moe-router-enable-expert-bias").empty());
  CHECK(after(a, "--multi-latent-attention").empty());
  CHECK(after(a, "--q-lora-rank") == "1536");
  CHECK(after(a, "--kv-lora-rank") == "512");
  CHECK(after(a, "--qk-head-dim") == "128");
  CHECK(after(a, "--qk-pos-emb-head-dim") == "64");
  CHECK(after(a, "--v-head-dim") == "128");
  CHECK(after(a, "--mtp-num-layers") == "1");
  CHECK(after(a, "--pipeline-model-parallel-layout") == "Et*7|(t*8|)*6,t*6mL");
  CHECK(after(a, "--use-tp-pp-dp-mapping") == "absent");
  // The layout reads back to the same split, m included.
  const std::vector<LayerRange> back = parse_megatron_layout("Et*7|(t*8|)*6,t*6mL", ev.scenario.model);
  REQUIRE(back.size() == ev.scenario.ranges.size());
  for (size_t i = 0; i < back.size(); ++i) {
    CHECK(back[i].first == ev.scenario.ranges[i].first);
    CHECK(back[i].last == ev.scenario.ranges[i].last);
  }
  CHECK(bad_input([&] { parse_megatron_layout("Et*7|(t*8|)*6,t*6L", ev.scenario.model); }) ==
        "--pipeline-model-parallel-layout 'Et*7|(t*8|)*6,t*6L': the loss L must follow all 61 transformer layers of "
        "'deepseek-v3'");
}

TEST_CASE("Megatron-LM: a repeating dense/MoE pattern, capacity padding, and experts with biases at etp 1 only") {
  Evaluation ev = moe_plan("mixtral-8x7b", 1, 2, 8, 8, 64, {16, 16});
  Model& m = ev.scenario.model;
  m.transformer->moe->every = 2;  // blocks 1, 3, 5, ... MoE (Llama 4 Maverick's interleave_moe_layer_step 2)
  ev.scenario.workload.capacity_factor = 1.25;
  const std::vector<std::string> a = megatron_arguments(ev);
  CHECK(after(a, "--moe-layer-freq") == "([0,1]*16)");
  CHECK(after(a, "--moe-expert-capacity-factor") == "1.25");
  CHECK(after(a, "--moe-pad-expert-input-to-capacity").empty());
  CHECK(after(a, "--multi-latent-attention") == "absent");
  Evaluation oss = moe_plan("gpt-oss-120b", 2, 2, 4, 4, 64, {18, 18});
  oss.scenario.parallel.etp = 2;
  CHECK(bad_input([&] { megatron_arguments(oss); }) ==
        "--etp: Megatron-Core runs experts with biases (gpt-oss) only at expert tensor parallelism 1, not 2; plan with "
        "--etp 1");
}

TEST_CASE("Megatron-LM: attention sinks run in cuDNN's fused attention, the rest in FlashAttention") {
  // transformer_engine/pytorch/attention/dot_product_attention/utils.py (d0067d0), "Filter: Softmax type":
  // learnable softmax disables FlashAttention; Megatron's --attention-backend flash turns off the fused and
  // unfused kernels (megatron/core/models/common/language_module/language_module.py), so gpt-oss needs fused.
  Evaluation oss = moe_plan("gpt-oss-120b", 1, 2, 4, 4, 64, {18, 18});
  REQUIRE(oss.scenario.model.transformer->attention_sinks);
  CHECK(after(megatron_arguments(oss), "--attention-backend") == "fused");
  const Evaluation mixtral = moe_plan("mixtral-8x7b", 1, 2, 8, 8, 64, {16, 16});
  CHECK(after(megatron_arguments(mixtral), "--attention-backend") == "flash");
  oss.scenario.workload.flash_attention = false;
  CHECK(after(megatron_arguments(oss), "--attention-backend") == "unfused");
}

TEST_CASE("Megatron-LM: selective recomputation's modules as a list after --recompute-modules") {
  // transformer_config.py: recompute_modules is a List[str] (nargs "+" from megatron/training/argument_utils.py),
  // ["core_attn"] by default, used with --recompute-granularity selective.
  Evaluation oss = moe_plan("gpt-oss-120b", 1, 2, 4, 4, 64, {18, 18});
  oss.scenario.workload.recompute = Recompute::Selective;
  std::vector<std::string> a = megatron_arguments(oss);
  CHECK(after(a, "--recompute-granularity") == "selective");
  CHECK(after(a, "--recompute-modules") == "absent");  // core_attn alone: Megatron's default
  oss.scenario.workload.recompute_modules = recompute_modules_from_string("layernorm,moe_act");
  a = megatron_arguments(oss);
  const auto at = std::find(a.begin(), a.end(), "--recompute-modules");
  REQUIRE(at != a.end());
  REQUIRE(a.end() - at >= 3);
  CHECK(*(at + 1) == "moe_act");
  CHECK(*(at + 2) == "layernorm");
  const std::string file = megatron_export(oss).text;
  CHECK(file.find("\n  --recompute-granularity selective\n  --recompute-modules moe_act layernorm\n") != std::string::npos);
  // elementwise is pipewright's (a hand-written backward), not a module Megatron-Core has: refused, not dropped.
  oss.scenario.workload.recompute_modules = recompute_modules_from_string("moe_act,elementwise");
  CHECK(bad_input([&] { megatron_arguments(oss); }) ==
        "--recompute-modules: Megatron-Core has no module that rebuilds the norms' and activations' outputs alone "
        "(elementwise); plan with layernorm and moe_act, or without elementwise");
}

TEST_CASE("bf16 gradients: Megatron-LM's --grad-reduce-in-bf16, refused where a framework keeps them otherwise") {
  // megatron/training/arguments.py: bf16 runs accumulate and reduce in fp32 unless --grad-reduce-in-bf16.
  Evaluation oss = moe_plan("gpt-oss-120b", 1, 2, 4, 4, 64, {18, 18});
  CHECK(after(megatron_arguments(oss), "--grad-reduce-in-bf16") == "absent");
  oss.scenario.parallel.grad_reduce_in_bf16 = true;
  CHECK(after(megatron_arguments(oss), "--grad-reduce-in-bf16").empty());
  Evaluation llama = moe_plan("llama3-8b", 1, 2, 4, 1, 64, {16, 16});
  llama.scenario.parallel.grad_reduce_in_bf16 = true;
  CHECK(bad_input([&] { export_plan(ExportTarget::Torchtitan, llama, "."); }) ==
        "--grad-reduce-in-bf16: --export torchtitan does not keep and reduce gradients in bf16 as simulated; leave it "
        "out or use --export megatron");
}

TEST_CASE("Megatron-LM: interleaved-overlap is interleaved with --overlap-moe-expert-parallel-comm") {
  Evaluation ev = moe_plan("mixtral-8x7b", 1, 2, 8, 8, 64, {16, 16});
  ev.scenario.schedule = "interleaved-overlap";
  ev.scenario.parallel.vpp = 2;
  ScheduleSpec spec{"interleaved-overlap", 2, ev.scenario.parallel.microbatches, 2};
  ev.schedule = make_schedule(spec);
  ev.scenario.ranges = split_layers(ev.scenario.model, 4, {8, 8, 8, 8});
  ev.stages.clear();
  for (int st = 0; st < 4; ++st) ev.stages.push_back(StageReport{st, st % 2, ev.scenario.ranges[static_cast<size_t>(st)], {}});
  const std::vector<std::string> a = megatron_arguments(ev);
  CHECK(after(a, "--num-virtual-stages-per-pipeline-rank") == "2");
  CHECK(after(a, "--overlap-moe-expert-parallel-comm").empty());
  CHECK(after(a, "--delay-wgrad-compute").empty());
  ev.scenario.workload.recompute = Recompute::Full;
  CHECK(bad_input([&] { megatron_arguments(ev); }) ==
        "--recompute: Megatron-Core's --overlap-moe-expert-parallel-comm does not run with full recompute; use none or "
        "selective with interleaved-overlap");
  ev.scenario.workload.recompute = Recompute::None;
  ev.scenario.parallel.ep = 1;
  CHECK(bad_input([&] { megatron_arguments(ev); }) ==
        "--ep: Megatron-Core overlaps the expert all-to-alls (interleaved-overlap) only with expert parallelism; plan "
        "with --ep 2 or more, or --schedules interleaved");
}

TEST_CASE("torchtitan: expert_parallel_degree inside dp_shard x cp x tp, MTP and etp refused, DeepSpeed refuses MoE") {
  Evaluation ev = moe_plan("qwen3-30b-a3b", 1, 2, 8, 8, 64, {24, 24});
  ev.scenario.parallel.zero = 3;
  const std::string toml = torchtitan_export(ev, "out")[0].text;
  CHECK(toml.find("expert_parallel_degree = 8\n") != std::string::npos);
  CHECK(toml.find("data_parallel_shard_degree = 8\n") != std::string::npos);
  ev.scenario.parallel.zero = 1;  // replicas: the sparse region is cp x tp = 1
  CHECK(bad_input([&] { torchtitan_export(ev, "out"); }) ==
        "--ep: torchtitan folds ep 8 into dp_shard x cp x tp = 1 x 1 x 1 (FSDP's shards) with whole experts (etp 1); "
        "plan with --zero 3, no --dp-shard and --etp 1, or an --ep dividing 1, for --export torchtitan");
  const Evaluation v3 = moe_plan("deepseek-v3", 2, 8, 64, 64, 8192, {7, 8, 8, 8, 8, 8, 8, 6});
  CHECK(bad_input([&] { torchtitan_export(v3, "out"); }) ==
        "--export torchtitan: torchtitan's models have no multi-token-prediction modules under pipeline parallelism "
        "(deepseek_v3's MTPDecoder refuses pp); plan 'deepseek-v3' without them (mtp_layers 0 in its model JSON)");

  SearchSpace space;
  CHECK(bad_input([&] { restrict_experts(ExportTarget::DeepSpeed, model_preset("mixtral-8x7b"), space); }) ==
        "--export deepspeed: model 'mixtral-8x7b' has routed experts, which DeepSpeed's pipeline engine (PipelineModule) "
        "does not run with expert parallelism; use --export megatron or torchtitan");
  space.etp = 2;
  CHECK(bad_input([&] { restrict_experts(ExportTarget::Torchtitan, model_preset("mixtral-8x7b"), space); }) ==
        "--etp: torchtitan removed expert tensor parallelism (April 2026); use --etp 1 with --export torchtitan");
  SearchSpace megatron;
  restrict_experts(ExportTarget::Megatron, model_preset("mixtral-8x7b"), megatron);
  CHECK(megatron.order == RankOrder::TpDpPp);
  SearchSpace dense;
  restrict_experts(ExportTarget::DeepSpeed, model_preset("llama3-8b"), dense);  // nothing to refuse
  CHECK_FALSE(dense.order);
}
