#include "exports/exports.hpp"

#include "core/error.hpp"
#include "exports/deepspeed.hpp"
#include "exports/megatron.hpp"
#include "exports/torchtitan.hpp"
#include "schedules/generators.hpp"

namespace pw {

void restrict_experts(ExportTarget t, const Model& model, SearchSpace& space) {
  if (!model.transformer || !model.transformer->moe) return;
  switch (t) {
    case ExportTarget::DeepSpeed:
      throw_bad_input("--export deepspeed: model '{}' has routed experts, which DeepSpeed's pipeline engine "
                      "(PipelineModule) does not run with expert parallelism; use --export megatron or torchtitan",
                      model.name);
    case ExportTarget::Megatron:
      if (space.order && *space.order != RankOrder::TpDpPp)
        throw_bad_input("--rank-order: Megatron-LM's tp-pp-dp mapping folds the experts into the tp x cp ranks only, "
                        "not as pipewright simulates ep; use --rank-order tp-dp-pp with --export megatron");
      space.order = RankOrder::TpDpPp;
      break;
    case ExportTarget::Torchtitan:
      if (space.etp && *space.etp != 1)
        throw_bad_input("--etp: torchtitan removed expert tensor parallelism (April 2026); use --etp 1 with --export "
                        "torchtitan");
      space.etp = 1;
      break;
  }
}

ExportTarget export_target_from_string(const std::string& text) {
  if (text == "megatron") return ExportTarget::Megatron;
  if (text == "deepspeed") return ExportTarget::DeepSpeed;
  if (text == "torchtitan") return ExportTarget::Torchtitan;
  throw_bad_input("--export: unknown target '{}'; use megatron, deepspeed or torchtitan", text);
}

const char* to_string(ExportTarget t) {
  switch (t) {
    case ExportTarget::Megatron: return "megatron";
    case ExportTarget::DeepSpeed: return "deepspeed";
    case ExportTarget::Torchtitan: return "torchtitan";
  }
  return "?";
}

std::vector<std::string> export_schedules(ExportTarget t) {
  switch (t) {
    case ExportTarget::Megatron: return megatron_schedules();
    case ExportTarget::DeepSpeed: return {"1f1b"};
    // Its CSV runs every micro-batch through every stage: one copy of the model (check_pytorch_csv_copies).
    case ExportTarget::Torchtitan: return one_copy_schedule_names();
  }
  return {};
}

std::vector<std::string> export_file_names(ExportTarget t) {
  switch (t) {
    case ExportTarget::Megatron: return {"megatron_args.sh"};
    case ExportTarget::DeepSpeed: return {"ds_config.json", "pipewright_partition.py"};
    case ExportTarget::Torchtitan:
      return {"pipewright_plan.py", "torchtitan_v0.2.2.toml", "pipewright_plan_v0_3_0.py", "pipewright_schedule.csv"};
  }
  return {};
}

std::vector<Recompute> export_recomputes(ExportTarget t) {
  // DeepSpeed checkpoints whole layers; torchtitan's selective checkpointing is op-level, not Megatron's.
  if (t == ExportTarget::DeepSpeed || t == ExportTarget::Torchtitan) return {Recompute::None, Recompute::Full};
  return {Recompute::None, Recompute::Selective, Recompute::Full};
}

std::vector<Precision> export_precisions(ExportTarget t) {
  if (t == ExportTarget::Megatron) return {Precision::Bf16, Precision::Fp8};
  return {Precision::Bf16};
}

bool export_runs_cp(ExportTarget t) { return t != ExportTarget::DeepSpeed; }

int export_min_zero_with_cp(ExportTarget t) { return t == ExportTarget::Torchtitan ? 3 : 0; }

std::optional<RankOrder> export_rank_order(ExportTarget t) {
  // Megatron-LM takes either (--use-tp-pp-dp-mapping); DeepSpeed's topology and torchtitan's device mesh
  // put pp outermost.
  if (t == ExportTarget::Megatron) return std::nullopt;
  return RankOrder::TpDpPp;
}

std::vector<ExportFile> export_plan(ExportTarget t, const Evaluation& plan, const std::string& dir) {
  const Scenario& s = plan.scenario;
  if (s.workload.recompute == Recompute::PerStage)
    throw_bad_input("--export {}: it applies one recompute mode to every stage, not a level per stage; plan with "
                    "--recompute none, selective or full",
                    to_string(t));
  check_state_widths(t, s.parallel);
  const std::optional<RankOrder> order = export_rank_order(t);
  if (order && s.parallel.order != *order && s.parallel.pp > 1 && s.parallel.dp > 1)
    throw_bad_input("--export {}: it places ranks {}, not {}; plan with --rank-order {}", to_string(t),
                    to_string(*order), to_string(s.parallel.order), to_string(*order));
  switch (t) {
    case ExportTarget::Megatron: return {megatron_export(plan)};
    case ExportTarget::DeepSpeed: return deepspeed_export(plan);
    case ExportTarget::Torchtitan: return torchtitan_export(plan, dir);
  }
  return {};
}

void check_activation_storage(ExportTarget t, const Workload& w) {
  // Megatron-Core's TransformerConfig has activation_func_fp8_input_store, but Megatron-LM's arguments leave it
  // out (megatron/training/arguments.py at d98e8a64 excludes it from the TransformerConfig flags); neither
  // DeepSpeed nor torchtitan has it.
  if (w.activation_fp8_input_store)
    throw_bad_input("--activation-func-fp8-input-store: --export {} has no flag that keeps the activation inputs in "
                    "fp8 as simulated; leave it out",
                    to_string(t));
}

void check_state_widths(ExportTarget t, const ParallelConfig& pc) {
  if (t == ExportTarget::Megatron) return;
  // torchtitan/trainer.py runs each micro-batch's backward with FSDP's gradient sync on and, with pp, PyTorch's
  // schedules turn it off until the last micro-batch (pipewright's default); it has no setting for another.
  // DeepSpeed's pipeline engine runs no ZeRO-3 (check_zero_level).
  if (t == ExportTarget::Torchtitan && pc.zero == 3 && pc.fsdp_grad_sync != ParallelConfig::GradSync::Default)
    throw_bad_input("--fsdp-grad-sync: torchtitan reduce-scatters FSDP gradients every micro-batch without pp and after "
                    "the last with pp, not {}; use --fsdp-grad-sync default with --export torchtitan",
                    to_string(pc.fsdp_grad_sync));
  // Megatron-LM writes --grad-reduce-in-bf16; torchtitan's FSDP keeps its sharded gradients in the fp32 of
  // its parameters whatever dtype it reduces in, and DeepSpeed's pipeline engine is not checked for it.
  if (pc.grad_reduce_in_bf16)
    throw_bad_input("--grad-reduce-in-bf16: --export {} does not keep and reduce gradients in bf16 as simulated; "
                    "leave it out or use --export megatron",
                    to_string(t));
  // Transformer Engine's FusedAdam under Megatron-Core's distributed optimizer; torchtitan's and DeepSpeed's
  // Adam keep fp32 master weights and moments.
  if (pc.optimizer_precision.precision_aware)
    throw_bad_input("--precision-aware-optimizer: --export {} keeps fp32 master weights and Adam moments, not the "
                    "narrower state simulated; leave it out or use --export megatron",
                    to_string(t));
}

void check_zero_level(ExportTarget t, int zero) {
  switch (t) {
    case ExportTarget::Megatron:
      if (zero >= 2)
        throw_bad_input("--zero: {} shards gradients{}; Megatron-LM's distributed optimizer shards the optimizer state "
                        "only (ZeRO-1); use --zero 0 or 1 with --export megatron",
                        zero, zero == 3 ? " and weights" : "");
      break;
    case ExportTarget::DeepSpeed:
      // deepspeed/runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
      if (zero >= 2)
        throw_bad_input("--zero: DeepSpeed's pipeline engine takes ZeRO stage 0 or 1, not {}; use --zero 0 or 1 with "
                        "--export deepspeed",
                        zero);
      break;
    case ExportTarget::Torchtitan:
      // torchtitan/config/configs.py: data_parallel_replicate_degree and data_parallel_shard_degree, the latter
      // FSDP over weights, gradients and optimizer state together; no level shards less.
      if (zero == 1 || zero == 2)
        throw_bad_input("--zero: torchtitan replicates the whole training state (data_parallel_replicate_degree) "
                        "or shards weights, gradients and optimizer state together (FSDP), not ZeRO-{}; use --zero 0 "
                        "or 3 with --export torchtitan",
                        zero);
      break;
  }
}

}  // namespace pw
