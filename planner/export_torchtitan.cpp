#include "planner/export_torchtitan.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.hpp"
#include "core/units.hpp"
#include "core/version.hpp"
#include "schedules/pytorch_csv.hpp"
#include "planner/exports.hpp"

namespace pw {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string torch_schedule_name(const Scenario& s) {
  const int group = s.group_size > 0 ? s.group_size : s.parallel.pp;
  if (s.schedule == "gpipe") return "GPipe";
  if (s.schedule == "1f1b") return "1F1B";
  if (s.schedule == "interleaved" && group == s.parallel.pp) return "Interleaved1F1B";
  if (s.schedule == "zb-v") return "ZBVZeroBubble";
  if (s.schedule == "dualpipev") return "DualPipeV";
  return "";
}

std::vector<std::vector<std::string>> torchtitan_module_fqns(const Model& model, const std::vector<LayerRange>& ranges) {
  if (!model.transformer)
    throw_bad_input("--export torchtitan: model '{}' gives explicit layer costs; torchtitan's module names "
                    "(tok_embeddings, layers.N, norm, output) need a transformer",
                    model.name);
  std::vector<std::vector<std::string>> out;
  for (const LayerRange& r : ranges) {
    std::vector<std::string> names;
    for (int i = r.first; i <= r.last; ++i) {
      const Layer& l = model.layers[static_cast<size_t>(i)];
      if (l.kind == LayerKind::Embedding) names.push_back("tok_embeddings");
      if (l.kind == LayerKind::Block) names.push_back(fmt::format("layers.{}", i - 1));
      if (l.kind == LayerKind::Head) {
        names.push_back("norm");
        names.push_back("output");
      }
    }
    out.push_back(std::move(names));
  }
  return out;
}

std::vector<ExportFile> torchtitan_export(const Evaluation& plan, const std::string& dir) {
  const Scenario& s = plan.scenario;
  const ParallelConfig& pc = s.parallel;
  if (pc.dp_cp() > 1) check_zero_level(ExportTarget::Torchtitan, pc.zero);
  // torchtitan/distributed/parallel_dims.py: fsdp_enabled is dp_shard > 1 or cp > 1, the weights sharded
  // over the dp_shard x cp ranks.
  if (pc.dp_replicas() > 1 && pc.zero != 3)
    throw_bad_input("--dp-shard: torchtitan shards within groups and replicates across them (HSDP) only with FSDP, "
                    "not ZeRO-{}; use --zero 3 with --dp-shard and --export torchtitan",
                    pc.zero);
  if (pc.cp > 1 && pc.zero != 3)
    throw_bad_input("--zero: torchtitan shards weights and gradients over the cp ranks (FSDP) whenever cp > 1, not "
                    "ZeRO-{}; use --zero 3 with --cp and --export torchtitan",
                    pc.zero);
  if (s.workload.precision == Precision::Fp8)
    throw_bad_input("--precision: torchtitan's float8 runs torchao's scaling recipes, not the Transformer Engine fp8 "
                    "pipewright simulates; use --precision bf16 with --export torchtitan");
  if (s.model.transformer && s.model.transformer->mtp_layers > 0)
    throw_bad_input("--export torchtitan: torchtitan's models have no multi-token-prediction modules; plan '{}' without "
                    "them (mtp_layers 0 in its model JSON)",
                    s.model.name);
  // torchtitan/distributed/parallel_dims.py: "expert_parallel_degree ({ep}) must divide dp_shard * cp * tp"; its
  // sparse mesh (pp, dp_replicate, efsdp, ep) puts ep consecutive ranks in a group, the experts whole (etp 1),
  // their state sharded over efsdp = dp_shard * cp * tp / ep and replicated over dp_replicate.
  const int dp_shard = pc.zero == 3 ? pc.dp / pc.dp_replicas() : 1;
  if (pc.ep > 1 && (pc.etp != 1 || (static_cast<long>(dp_shard) * pc.cp * pc.tp) % pc.ep != 0 || pc.dp_replicas() > 1))
    throw_bad_input("--ep: torchtitan folds ep {} into dp_shard x cp x tp = {} x {} x {} (FSDP's shards) with whole "
                    "experts (etp 1); plan with --zero 3, no --dp-shard and --etp 1, or an --ep dividing {}, for --export "
                    "torchtitan",
                    pc.ep, dp_shard, pc.cp, pc.tp, static_cast<long>(dp_shard) * pc.cp * pc.tp);
  if (pc.ep > 1 && s.workload.dispatcher != Workload::Dispatcher::AllToAll)
    throw_bad_input("--dispatcher: torchtitan's expert parallelism dispatches with all-to-alls, not the flex "
                    "dispatcher's node-deduplicated copies; use --dispatcher alltoall with --export torchtitan");
  std::vector<LayerRange> ranges;
  for (const StageReport& st : plan.stages) ranges.push_back(st.layers);
  const auto fqns = torchtitan_module_fqns(s.model, ranges);
  const std::string name = torch_schedule_name(s);
  const std::string csv_path = (std::filesystem::path(dir) / "pipewright_schedule.csv").generic_string();

  std::string t = fmt::format(
      "# pipewright {}: {} on {}, {} GPUs, {} schedule; predicted {} per step, {} peak memory.\n"
      "# Keys of torchtitan's ParallelismConfig (torchtitan/config/parallelism.py) and TrainingConfig\n"
      "# (torchtitan/config/training.py), the generation with pipeline_parallel_module_fqns_per_model_part and\n"
      "# num_pp_microbatches; older releases name the split module_fqns_per_model_part or\n"
      "# pipeline_parallel_split_points.\n"
      "[parallelism]\n",
      kVersion, s.model.name, s.cluster.name, pc.gpus(), s.schedule, format_seconds(plan.metrics.step_time_s),
      format_bytes(plan.metrics.peak_memory_bytes));
  if (pc.zero == 3) {
    // FSDP over the shard groups (HSDP with replicas); reshard as simulated (torchtitan's "default" is the
    // same rule: not with pp).
    t += fmt::format("data_parallel_replicate_degree = {}\n", pc.dp_replicas());
    t += fmt::format("data_parallel_shard_degree = {}\n", pc.dp / pc.dp_replicas());
    t += fmt::format("fsdp_reshard_after_forward = {}\n", quoted(to_string(pc.reshard_after_forward)));
  } else {
    t += "# pipewright counted dp as replicas with a sharded optimizer (ZeRO-1); torchtitan's FSDP\n"
         "# (data_parallel_shard_degree) shards weights too and needs less memory than predicted.\n";
    t += fmt::format("data_parallel_replicate_degree = {}\n", pc.dp);
    t += "data_parallel_shard_degree = 1\n";
  }
  t += fmt::format("context_parallel_degree = {}\n", pc.cp);
  t += fmt::format("tensor_parallel_degree = {}\n", pc.tp);
  t += fmt::format("enable_sequence_parallel = {}\n", pc.tp > 1 && s.workload.sequence_parallel ? "true" : "false");
  t += fmt::format("pipeline_parallel_degree = {}\n", pc.pp);
  if (pc.ep > 1) t += fmt::format("expert_parallel_degree = {}\n", pc.ep);
  if (name.empty()) {
    t += fmt::format("# PyTorch has no schedule class for pipewright's {}: its order is in the CSV.\n", s.schedule);
    t += "pipeline_parallel_schedule = \"PipelineScheduleMulti\"\n";
    t += fmt::format("pipeline_parallel_schedule_csv = {}\n", quoted(csv_path));
  } else {
    t += fmt::format("pipeline_parallel_schedule = {}\n", quoted(name));
  }
  t += fmt::format("num_pp_microbatches = {}\n", pc.microbatches);
  t += "pipeline_parallel_module_fqns_per_model_part = [\n";
  for (const auto& stage : fqns) {
    t += "  [";
    for (size_t i = 0; i < stage.size(); ++i) t += (i ? ", " : "") + quoted(stage[i]);
    t += "],\n";
  }
  t += "]\n\n[training]\n";
  t += fmt::format("num_tokens_per_microbatch_per_dp_rank = {}\n",
                   static_cast<long>(s.workload.micro_batch_size) * s.workload.seq_len);
  t += fmt::format("num_tokens_per_train_step = {}\n", static_cast<long>(s.global_batch_size) * s.workload.seq_len);
  t += fmt::format("max_context_length = {}\n", s.workload.seq_len);
  t += "\n[activation_checkpoint]\n";
  switch (s.workload.recompute) {
    case Recompute::None: t += "mode = \"none\"\n"; break;
    case Recompute::Selective:
      t += "# torchtitan's op-level selective checkpointing is the closest to recomputing the attention core.\n"
           "mode = \"selective\"\nselective_ac_option = \"op\"\n";
      break;
    case Recompute::Full: t += "mode = \"full\"\n"; break;
    case Recompute::PerStage: break;  // export_plan() refuses it
  }
  std::vector<ExportFile> files{ExportFile{"torchtitan.toml", t}};
  if (name.empty()) files.push_back(ExportFile{"pipewright_schedule.csv", schedule_to_pytorch_csv(plan.schedule)});
  return files;
}

}  // namespace pw
