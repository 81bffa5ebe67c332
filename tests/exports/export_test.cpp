// Exports of a plan to Megatron-LM, DeepSpeed and torchtitan: compared with hand-checked golden files
// (tests/golden/exports/), and the Megatron layout read back gives the same split.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "../error_text.hpp"
#include "../golden.hpp"
#include "core/error.hpp"
#include "planner/baseline_splits.hpp"
#include "exports/deepspeed.hpp"
#include "exports/megatron.hpp"
#include "exports/torchtitan.hpp"
#include "../planner/planned.hpp"
#include "exports/exports.hpp"
#include "schedules/generators.hpp"
#include "schedules/pytorch_csv.hpp"

using namespace pw;

namespace {

// A plan as the search returns it, with fixed predictions so that the goldens do not move with the cost
// model: llama3-8b (embedding, 32 blocks, head) on H100 nodes, the given transformer blocks per stage.
Evaluation plan_of(int tp, int pp, int dp, int vpp, const std::string& schedule, int mbs, int global_batch,
                   Recompute recompute, const std::vector<int>& blocks) {
  Scenario s;
  s.model = model_preset("llama3-8b");
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.tp = tp;
  s.parallel.pp = pp;
  s.parallel.dp = dp;
  s.parallel.vpp = vpp;
  s.schedule = schedule;
  s.workload.micro_batch_size = mbs;
  s.workload.recompute = recompute;
  s.global_batch_size = global_batch;
  return test::planned(s, blocks);
}

std::string ranges_text(const std::vector<LayerRange>& r) {
  std::string out;
  for (const LayerRange& x : r) out += fmt::format("[{},{}]", x.first, x.last);
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("Megatron-LM arguments for an interleaved plan with an uneven split") {
  // pp 4 x vpp 2 = 8 stages of 3, 4, 4, 5, 4, 4, 4, 4 blocks: entry i of the layout is stage i (virtual
  // stage i / 4 of pipeline rank i mod 4). The first holds the embedding ("Ettt"), the last the head
  // ("t*4L"); three equal middle stages "t*4|" fold into "(t*4|)*3" (8 characters instead of 12).
  // tp 2 with sequence parallelism; 64 sequences = micro-batch 1 x 32 micro-batches x dp 2; selective
  // recompute; the distributed optimizer (ZeRO-1 over dp 2) with the reduction overlapped in buckets (Megatron's
  // flag is off by default) and fused attention, as simulated. The group size is Megatron's default (pp).
  const Evaluation ev = plan_of(2, 4, 2, 2, "interleaved", 1, 64, Recompute::Selective, {3, 4, 4, 5, 4, 4, 4, 4});
  CHECK(megatron_layout(ev.scenario.model, ev.scenario.ranges) == "Ettt|t*4|t*4|t*5|(t*4|)*3,t*4L");
  const ExportFile f = megatron_export(ev);
  CHECK(f.name == "megatron_args.sh");
  check_golden("exports/megatron_interleaved.sh", f.text);
}

TEST_CASE("Megatron-LM's own even split needs no layout, breadth-first sets the group size") {
  // 32 blocks over 4 x 2 stages, 4 each: Megatron's default split, so --num-virtual-stages-per-pipeline-rank
  // 2 instead of a layout; bfs is interleaved with a group of all m = 16 micro-batches; full recompute is
  // --recompute-granularity full --recompute-method uniform --recompute-num-layers 1.
  const Evaluation ev = plan_of(8, 4, 1, 2, "bfs", 2, 32, Recompute::Full, {4, 4, 4, 4, 4, 4, 4, 4});
  check_golden("exports/megatron_bfs_even.sh", megatron_export(ev).text);
  CHECK(error_of([] { megatron_export(plan_of(1, 4, 1, 1, "zb-h1", 1, 8, Recompute::None, {8, 8, 8, 8})); }) ==
        "--export megatron: Megatron-LM runs 1f1b, interleaved, interleaved-overlap and bfs, not zb-h1; plan with "
        "--schedules 1f1b,interleaved,interleaved-overlap,bfs");
}

TEST_CASE("Megatron-LM layouts read back to the same split") {
  const Model model = model_preset("llama3-8b");  // 34 layers: embedding, 32 blocks, head
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int stages = 1 + static_cast<int>(rng() % 34);
    // A random contiguous split: stages - 1 distinct cut points among the 33 boundaries.
    std::vector<int> cuts;
    for (int b = 1; b < 34; ++b) cuts.push_back(b);
    std::shuffle(cuts.begin(), cuts.end(), rng);
    cuts.resize(static_cast<size_t>(stages - 1));
    std::sort(cuts.begin(), cuts.end());
    cuts.insert(cuts.begin(), 0);
    cuts.push_back(34);
    const std::vector<LayerRange> ranges = ranges_from_parts(cuts);
    const std::string layout = megatron_layout(model, ranges);
    INFO(layout);
    CHECK(ranges_text(parse_megatron_layout(layout, model)) == ranges_text(ranges));
  }
}

TEST_CASE("Megatron-LM layouts are read as Megatron reads them") {
  // Megatron's own example shapes (docs of --pipeline-model-parallel-layout): "Et*3|(tt|)*29,m|L" has an
  // MTP module; without it, "Et*3|(tt|)*29,t|L" is 32 stages of a 62-block model: 3 blocks and the
  // embedding, then 29 stages of 2, then 1 block, then the loss alone.
  TransformerConfig c = model_preset("llama3-8b").transformer.value();
  c.layers = 62;
  const Model model = make_transformer_model("deep", c);
  const std::vector<LayerRange> r = parse_megatron_layout("Et*3|(tt|)*29,t|L", model);
  REQUIRE(r.size() == 32);
  CHECK(r[0].first == 0);
  CHECK(r[0].last == 3);
  CHECK(r[1].first == 4);
  CHECK(r[1].last == 5);
  CHECK(r[30].first == 62);
  CHECK(r[30].last == 62);
  CHECK(r[31].first == 63);
  CHECK(r[31].last == 63);
  CHECK(error_of([&] { parse_megatron_layout("Et*3|(tt|)*29,m|L", model); }) ==
        "--pipeline-model-parallel-layout 'Et*3|(tt|)*29,m|L': 61 t and 1 m, but model 'deep' has 62 transformer "
        "layers then 0 MTP modules after the embedding");
  // With 61 blocks and one MTP module the example is 32 stages, the module alone on stage 30.
  c.layers = 61;
  c.mtp_layers = 1;
  const Model mtp = make_transformer_model("mtp", c);
  const std::vector<LayerRange> m = parse_megatron_layout("Et*3|(tt|)*29,m|L", mtp);
  REQUIRE(m.size() == 32);
  CHECK(mtp.layers[static_cast<size_t>(m[30].first)].kind == LayerKind::Mtp);
  CHECK(m[30].first == m[30].last);
  CHECK(megatron_layout(mtp, m) == "Ettt|(tt|)*29,m|L");  // "ttt": as short as "t*3"
  CHECK(error_of([&] { parse_megatron_layout("Et*3|(tt|)*29,x|L", mtp); }) ==
        "--pipeline-model-parallel-layout 'Et*3|(tt|)*29,x|L': 'x' is not a layer; use E (embedding), t (transformer "
        "layer), m (MTP module) or L (loss)");
  CHECK(error_of([&] { parse_megatron_layout("Et*3||t*59L", model); }) ==
        "--pipeline-model-parallel-layout 'Et*3||t*59L': stage 1 is empty; pipewright stages hold at least one layer");
  CHECK(error_of([&] { parse_megatron_layout("Et*3|t*58L", model); }) ==
        "--pipeline-model-parallel-layout 'Et*3|t*58L': the loss L must follow all 62 transformer layers of 'deep'");
}

TEST_CASE("DeepSpeed: ds_config and, for an uneven split, the PipelineModule subclass") {
  // 1f1b on pp 4 with 6 + 9 + 9 + 8 blocks: stages start at layers 0, 7, 16, 25 (PARTS, with the 34
  // layers at the end); DeepSpeed's uniform over 34 layers would be 9, 9, 8, 8 layers (0, 9, 18, 26, 34),
  // so the bounds are exported. 128 sequences = micro-batch 2 x 16 steps of gradient accumulation x dp 4.
  Evaluation ev = plan_of(2, 4, 4, 1, "1f1b", 2, 128, Recompute::Full, {6, 9, 9, 8});
  // deepspeed/runtime/pipe/schedule.py: TrainSchedule reduces after the last backward (ReduceGrads).
  CHECK(error_of([&] { deepspeed_export(ev); }) ==
        "--overlap-grad-reduce: DeepSpeed's pipeline engine reduces gradients after the last backward (ReduceGrads); "
        "plan with --no-overlap-grad-reduce for --export deepspeed");
  ev.scenario.parallel.overlap_grad_reduce = false;
  const std::vector<ExportFile> files = deepspeed_export(ev);
  REQUIRE(files.size() == 2);
  CHECK(files[0].name == "ds_config.json");
  CHECK(files[1].name == "pipewright_partition.py");
  check_golden("exports/ds_config_custom.json", files[0].text);
  check_golden("exports/pipewright_partition.py", files[1].text);
}

TEST_CASE("DeepSpeed: a split that partition_method=\"uniform\" gives is exported as \"uniform\"") {
  // 34 layers over 4 stages uniformly: 9, 9, 8, 8 layers = the embedding and 8 blocks, 9, 8, 7 and the head.
  CHECK(deepspeed_partition_uniform(34, 4) == std::vector<int>{0, 9, 18, 26, 34});
  Evaluation ev = plan_of(1, 4, 2, 1, "1f1b", 1, 16, Recompute::None, {8, 9, 8, 7});
  ev.scenario.parallel.overlap_grad_reduce = false;
  CHECK(deepspeed_uniform(ev.scenario.model, ev.scenario.ranges));
  const std::vector<ExportFile> files = deepspeed_export(ev);
  REQUIRE(files.size() == 2);
  check_golden("exports/ds_config_uniform.json", files[0].text);
  check_golden("exports/pipewright_partition_uniform.py", files[1].text);
  // deepspeed/runtime/config.py copies "pipeline" and nothing reads its "stages" or "partition".
  CHECK(files[0].text.find("\"stages\"") == std::string::npos);
  CHECK(files[0].text.find("\"partition\"") == std::string::npos);
  CHECK(error_of([] { deepspeed_export(plan_of(1, 4, 2, 2, "interleaved", 1, 16, Recompute::None, {4, 4, 4, 4, 4, 4, 4, 4})); }) ==
        "--export deepspeed: DeepSpeed's pipeline engine runs its own 1F1B order, not interleaved; plan with "
        "--schedules 1f1b");
  CHECK(error_of([] { deepspeed_export(plan_of(1, 4, 2, 1, "1f1b", 1, 16, Recompute::Selective, {8, 8, 8, 8})); }) ==
        "--export deepspeed: DeepSpeed checkpoints whole layers (activation_checkpoint_interval), not selectively; "
        "plan with --recompute none or full");
}

TEST_CASE("DeepSpeed: a split that partition_method=\"parameters\" gives is built by that method") {
  const Model model = model_preset("llama3-8b");
  const std::vector<LayerRange> params = parameters_split(model, 4);
  std::vector<int> blocks;
  for (const LayerRange& r : params) {
    int n = 0;
    for (int i = r.first; i <= r.last; ++i) n += model.layers[static_cast<size_t>(i)].kind == LayerKind::Block;
    blocks.push_back(n);
  }
  Evaluation ev = plan_of(1, 4, 2, 1, "1f1b", 1, 16, Recompute::None, blocks);
  ev.scenario.parallel.overlap_grad_reduce = false;
  REQUIRE(parts_from_ranges(ev.scenario.ranges) == parts_from_ranges(params));
  REQUIRE_FALSE(deepspeed_uniform(model, params));
  const std::vector<ExportFile> files = deepspeed_export(ev);
  REQUIRE(files.size() == 2);
  CHECK(files[1].text.find("    return PipelineModule(layers=layers, num_stages=4, partition_method=\"parameters\", "
                           "activation_checkpoint_interval=0, **kwargs)\n") != std::string::npos);
  CHECK(files[1].text.find("PARTS") == std::string::npos);
}

TEST_CASE("DeepSpeed's partition methods, as its code computes them") {
  // partition_uniform(10, 4): 2 each, the first 10 - 8 = 2 parts one more: 3, 3, 2, 2.
  CHECK(deepspeed_partition_uniform(10, 4) == std::vector<int>{0, 3, 6, 8, 10});
  CHECK(deepspeed_partition_uniform(3, 5) == std::vector<int>{0, 1, 2, 3, 3, 3});
  // partition_balanced (the linear-partition DP on heaviest minus lightest part, later cut on ties),
  // values from running DeepSpeed's function: [10 | 1 x 8 | 10] is 10, 8, 10; [5 | 1 x 5] is 5, 5.
  CHECK(deepspeed_partition_balanced({10, 1, 1, 1, 1, 1, 1, 1, 1, 10}, 3) == std::vector<int>{0, 1, 9, 10});
  CHECK(deepspeed_partition_balanced({5, 1, 1, 1, 1, 1}, 2) == std::vector<int>{0, 1, 6});
  CHECK(deepspeed_partition_balanced({1, 2, 3, 4, 5, 6}, 3) == std::vector<int>{0, 3, 5, 6});
  CHECK(deepspeed_partition_balanced({3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, 4) == std::vector<int>{0, 5, 6, 8, 10});
  // Fewer layers than stages: uniform.
  CHECK(deepspeed_partition_balanced({1, 1}, 3) == std::vector<int>{0, 1, 2, 2});
}

TEST_CASE("torchtitan: main's Python config, v0.2.2's TOML and 0.3.0's Python config, module names per stage, FSDP") {
  // Interleaved with Megatron's group size is PyTorch's Interleaved1F1B (loop placement); stage i's modules:
  // tok_embeddings first, layers.N for block N, norm and the output projection (main: lm_head,
  // torchtitan/models/common/decoder.py; v0.2.2: output) with the head.
  Evaluation ev = plan_of(2, 4, 2, 2, "interleaved", 1, 64, Recompute::Full, {3, 4, 4, 5, 4, 4, 4, 4});
  CHECK(torch_schedule_name(ev.scenario) == "Interleaved1F1B");
  // torchtitan/config/configs.py has data_parallel_replicate_degree and FSDP's data_parallel_shard_degree only.
  CHECK(bad_input([&] { torchtitan_export(ev, "out"); }) ==
        "--zero: torchtitan replicates the whole training state (data_parallel_replicate_degree) or shards weights, "
        "gradients and optimizer state together (FSDP), not ZeRO-1; use --zero 0 or 3 with --export torchtitan");
  ev.scenario.parallel.zero = 3;
  const std::vector<ExportFile> files = torchtitan_export(ev, "out");
  REQUIRE(files.size() == 3);
  CHECK(files[0].name == "pipewright_plan.py");
  CHECK(files[1].name == "torchtitan_v0.2.2.toml");
  CHECK(files[2].name == "pipewright_plan_v0_3_0.py");
  check_golden("exports/pipewright_plan_interleaved.py", files[0].text);
  check_golden("exports/torchtitan_v0.2.2_interleaved.toml", files[1].text);
  // The activation_checkpoint.py policies: SelectiveAC is op-level, not the attention core.
  ev.scenario.workload.recompute = Recompute::Selective;
  CHECK(bad_input([&] { torchtitan_export(ev, "out"); }) ==
        "--recompute: torchtitan's selective checkpointing (SelectiveAC) is op-level, saving matmul outputs and "
        "recomputing every second one, not the attention-core recomputation pipewright simulates; use --recompute "
        "none or full with --export torchtitan");
  CHECK(export_recomputes(ExportTarget::Torchtitan) == std::vector<Recompute>{Recompute::None, Recompute::Full});
}

TEST_CASE("torchtitan: a dense 1f1b plan replicated over dp (ZeRO 0) for main, v0.2.2 and 0.3.0") {
  Evaluation ev = plan_of(1, 4, 2, 1, "1f1b", 1, 16, Recompute::None, {8, 8, 8, 8});
  ev.scenario.parallel.zero = 0;
  const std::vector<ExportFile> files = torchtitan_export(ev, "out");
  REQUIRE(files.size() == 3);
  check_golden("exports/pipewright_plan_1f1b.py", files[0].text);
  check_golden("exports/torchtitan_v0.2.2_1f1b.toml", files[1].text);
  CHECK(files[2].text.find("        \"data_parallel_replicate_degree\": 2,\n        \"data_parallel_shard_degree\": 1,\n") !=
        std::string::npos);
}

TEST_CASE("torchtitan 0.3.0: micro-batches as local_batch_size / pipeline_parallel_microbatch_size, or without pp as "
          "gradient-accumulation steps; a sequence tp x 2 cp does not divide is refused") {
  // trainer.py at 0.3.0: n_microbatches = local_batch_size // pipeline_parallel_microbatch_size with pp, and
  // global_batch_size // (local_batch_size x dp) accumulation steps: m = 8 micro-batches of 2 on dp 2.
  // The file in full: FSDP over dp 2, tp 2 with sequence parallelism, no recomputation.
  Evaluation ev = plan_of(2, 2, 2, 1, "1f1b", 2, 32, Recompute::None, {16, 16});
  ev.scenario.parallel.zero = 3;
  const std::vector<ExportFile> files = torchtitan_export(ev, "out");
  REQUIRE(files.size() == 3);
  CHECK(files[2].name == "pipewright_plan_v0_3_0.py");
  check_golden("exports/pipewright_plan_v0_3_0.py", files[2].text);
  // Without pp the model takes local_batch_size sequences at once: the micro-batch, accumulated 8 times.
  ev = plan_of(2, 1, 2, 1, "1f1b", 2, 32, Recompute::None, {32});
  ev.scenario.parallel.zero = 3;
  const std::vector<ExportFile> flat = torchtitan_export(ev, "out");
  CHECK(flat[1].text.find("local_batch_size = 2\nglobal_batch_size = 32\n") != std::string::npos);
  CHECK(flat[2].text.find("        \"local_batch_size\": 2,\n        \"global_batch_size\": 32,\n") != std::string::npos);
  // The guard the file runs before it sets anything: each field checked against the dataclass.
  CHECK(flat[2].text.find("        _require(getattr(config, section), values)\n") != std::string::npos);
  // Main splits the micro-batch's 2 x 4095 tokens over tp 2; 0.3.0 holds each sequence of 4095 to it.
  ev.scenario.workload.seq_len = 4095;
  CHECK(bad_input([&] { torchtitan_export(ev, "out"); }) ==
        "--seq-len: torchtitan 0.3.0 splits each sequence of 4095 tokens over tp 2 x 1 context shards; use a sequence "
        "length that 2 divides");
}

TEST_CASE("torchtitan: a schedule PyTorch has no class for ships as a CSV, under the name that places its stages") {
  // zb-h1 on pp 2 with m = 4: the CSV (one row per rank; I the input-gradient backward, W the weight one)
  // runs under _PipelineScheduleRuntime; PipelineScheduleMulti gives loop placement
  // (torchtitan/distributed/pipeline_parallel.py, _get_pp_rank_to_stage_indices_mapping).
  const Evaluation ev = plan_of(1, 2, 1, 1, "zb-h1", 1, 4, Recompute::None, {16, 16});
  CHECK(torch_schedule_name(ev.scenario).empty());
  const std::vector<ExportFile> files = torchtitan_export(ev, "exports");
  REQUIRE(files.size() == 4);
  check_golden("exports/pipewright_plan_zb_h1.py", files[0].text);
  check_golden("exports/torchtitan_v0.2.2_zb_h1.toml", files[1].text);
  CHECK(files[2].text.find("        \"pipeline_parallel_schedule\": \"PipelineScheduleMulti\",\n"
                           "        \"pipeline_parallel_schedule_csv\": \"exports/pipewright_schedule.csv\",\n") != std::string::npos);
  CHECK(files[3].name == "pipewright_schedule.csv");
  check_golden("exports/pipewright_schedule_zb_h1.csv", files[3].text);

  // V-Half puts rank r's stages at r and 2p - 1 - r: only ZBVZeroBubble (and DualPipeV) place stages so in
  // torchtitan, so the CSV goes under that name and its rows run the stages torchtitan built.
  const Evaluation v = plan_of(1, 2, 1, 1, "v-half", 1, 4, Recompute::None, {8, 8, 8, 8});
  REQUIRE(v.schedule.placement.kind == PlacementKind::V);
  const std::vector<ExportFile> vf = torchtitan_export(v, "exports");
  REQUIRE(vf.size() == 4);
  check_golden("exports/pipewright_plan_v_half.py", vf[0].text);
  check_golden("exports/torchtitan_v0.2.2_v_half.toml", vf[1].text);
  check_golden("exports/pipewright_schedule_v_half.csv", vf[3].text);
  CHECK(vf[0].text.find("    p.pipeline_parallel_schedule = \"ZBVZeroBubble\"\n") != std::string::npos);
  CHECK(vf[1].text.find("pipeline_parallel_schedule = \"ZBVZeroBubble\"\n") != std::string::npos);
  CHECK(vf[2].text.find("        \"pipeline_parallel_schedule\": \"ZBVZeroBubble\",\n") != std::string::npos);
  const Schedule back = schedule_from_pytorch_csv(vf[3].text, "v.csv");
  CHECK(back.placement.stage_rank == std::vector<int>{0, 1, 1, 0});
  // Stage 3 (rank 0's second) holds the last blocks and the head: its module list ends with norm and lm_head.
  CHECK(vf[0].text.find("\"layers.31\", \"norm\", \"lm_head\"],\n    ]") != std::string::npos);
}

TEST_CASE("export targets are named and checked") {
  CHECK(export_target_from_string("megatron") == ExportTarget::Megatron);
  CHECK(error_of([] { export_target_from_string("nemo"); }) ==
        "--export: unknown target 'nemo'; use megatron, deepspeed or torchtitan");
  CHECK(export_schedules(ExportTarget::DeepSpeed) == std::vector<std::string>{"1f1b"});
  CHECK(export_schedules(ExportTarget::Megatron) == std::vector<std::string>{"1f1b", "bfs", "interleaved", "interleaved-overlap"});
  CHECK(export_recomputes(ExportTarget::DeepSpeed) == std::vector<Recompute>{Recompute::None, Recompute::Full});
}

TEST_CASE("Megatron-LM arguments carry fp8 and unfused attention as simulated, DeepSpeed and torchtitan refuse fp8") {
  Evaluation ev = plan_of(2, 4, 2, 2, "interleaved", 1, 64, Recompute::Selective, {3, 4, 4, 5, 4, 4, 4, 4});
  ev.scenario.workload.precision = Precision::Fp8;
  ev.scenario.workload.flash_attention = false;
  ev.scenario.parallel.overlap_grad_reduce = false;
  const std::vector<std::string> a = megatron_arguments(ev);
  const auto has = [&](const std::string& x) { return std::find(a.begin(), a.end(), x) != a.end(); };
  CHECK(has("--fp8-format"));
  CHECK(has("hybrid"));
  CHECK(has("--fp8-recipe"));
  CHECK(has("delayed"));
  CHECK(has("unfused"));
  CHECK_FALSE(has("--overlap-grad-reduce"));
  CHECK(bad_input([&] { torchtitan_export(ev, "out"); }) ==
        "--precision: torchtitan's float8 runs torchao's scaling recipes, not the Transformer Engine fp8 pipewright "
        "simulates; use --precision bf16 with --export torchtitan");
  ev.scenario.parallel.zero = 3;
  CHECK(bad_input([&] { megatron_arguments(ev); }) ==
        "--zero: 3 shards gradients and weights; Megatron-LM's distributed optimizer shards the optimizer state only "
        "(ZeRO-1); use --zero 0 or 1 with --export megatron");
}

TEST_CASE("context parallelism: Megatron-LM's --context-parallel-size, torchtitan's context_parallel_degree with FSDP") {
  // megatron/core/model_parallel_config.py: context_parallel_size; the dp-cp group shards the optimizer
  // even at dp 1. torchtitan/distributed/parallel_dims.py: fsdp_enabled = dp_shard > 1 or cp > 1.
  Evaluation ev = plan_of(2, 4, 1, 1, "1f1b", 1, 8, Recompute::None, {8, 8, 8, 8});
  ev.scenario.parallel.cp = 2;
  const std::vector<std::string> a = megatron_arguments(ev);
  const auto after = [&](const std::string& flag) {
    const auto it = std::find(a.begin(), a.end(), flag);
    return it == a.end() || it + 1 == a.end() ? std::string() : *(it + 1);
  };
  CHECK(after("--context-parallel-size") == "2");
  CHECK(std::find(a.begin(), a.end(), "--use-distributed-optimizer") != a.end());
  CHECK(bad_input([&] { torchtitan_export(ev, "out"); }) ==
        "--zero: torchtitan shards weights and gradients over the cp ranks (FSDP) whenever cp > 1, not ZeRO-1; use "
        "--zero 3 with --cp and --export torchtitan");
  ev.scenario.parallel.zero = 3;
  const std::vector<ExportFile> cp = torchtitan_export(ev, "out");
  CHECK(cp[0].text.find("    p.context_parallel_degree = 2\n") != std::string::npos);
  CHECK(cp[0].text.find("    p.data_parallel_shard_degree = 1\n") != std::string::npos);
  CHECK(cp[1].text.find("context_parallel_degree = 2\n") != std::string::npos);
  CHECK(cp[2].text.find("        \"context_parallel_degree\": 2,\n") != std::string::npos);
  ev.scenario.parallel.zero = 1;
  CHECK(bad_input([&] { deepspeed_export(ev); }) ==
        "--cp: DeepSpeed's pipeline engine has no ring-attention context parallelism (its Ulysses sequence parallelism "
        "splits heads, not the sequence's K/V); use --cp 1 with --export deepspeed");
}

TEST_CASE("hybrid sharding: Megatron-LM's distributed-optimizer instances, torchtitan's replicate x shard degrees") {
  // megatron/training/arguments.py: --num-distributed-optimizer-instances (parallel_state.py splits the
  // dp-cp ranks into that many consecutive groups); torchtitan's ParallelismConfig:
  // data_parallel_replicate_degree x data_parallel_shard_degree.
  Evaluation ev = plan_of(2, 2, 4, 1, "1f1b", 1, 16, Recompute::None, {16, 16});
  ev.scenario.parallel.dp_shard = 2;
  const std::vector<std::string> a = megatron_arguments(ev);
  const auto it = std::find(a.begin(), a.end(), "--num-distributed-optimizer-instances");
  REQUIRE(it != a.end());
  CHECK(*(it + 1) == "2");
  CHECK(bad_input([&] { torchtitan_export(ev, "out"); }) ==
        "--dp-shard: torchtitan shards within groups and replicates across them (HSDP) only with FSDP, not ZeRO-1; use "
        "--zero 3 with --dp-shard and --export torchtitan");
  ev.scenario.parallel.overlap_grad_reduce = false;  // as DeepSpeed's engine reduces
  CHECK(bad_input([&] { deepspeed_export(ev); }) ==
        "--dp-shard: DeepSpeed's pipeline engine shards ZeRO-1 state over all of dp; use --dp-shard 4 (or none) with "
        "--export deepspeed");
  ev.scenario.parallel.zero = 3;
  ev.scenario.parallel.order = RankOrder::TpDpPp;
  const std::vector<ExportFile> hsdp = torchtitan_export(ev, "out");
  CHECK(hsdp[0].text.find("    p.data_parallel_replicate_degree = 2\n    p.data_parallel_shard_degree = 2\n") !=
        std::string::npos);
  CHECK(hsdp[1].text.find("data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 2\n") != std::string::npos);
  CHECK(hsdp[2].text.find("        \"data_parallel_replicate_degree\": 2,\n        \"data_parallel_shard_degree\": 2,\n") !=
        std::string::npos);
}
