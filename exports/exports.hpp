#pragma once
// Exporting a plan to the frameworks people train with: Megatron-LM (command-line arguments), DeepSpeed
// (ds_config JSON and a PipelineModule subclass holding the split) and torchtitan (the [parallelism] TOML
// section and, for schedules PyTorch has no class for, the schedule as CSV). Each target runs only some
// schedules and recompute modes; the search is restricted to them when an export is asked for.
#include <optional>
#include <string>
#include <vector>

#include "core/workload.hpp"
#include "planner/search.hpp"
#include "sim/scenario.hpp"

namespace pw {

enum class ExportTarget { Megatron, DeepSpeed, Torchtitan };
ExportTarget export_target_from_string(const std::string& text);  // BadInput naming --export otherwise
const char* to_string(ExportTarget t);

struct ExportFile {
  std::string name;  // file name inside the export folder
  std::string text;
};

// The schedules (among schedule_names()) and recompute modes the target can run.
std::vector<std::string> export_schedules(ExportTarget t);
std::vector<Recompute> export_recomputes(ExportTarget t);
// The precisions the target runs as pipewright simulates them (Transformer Engine's fp8: Megatron-LM only),
// and whether it runs context parallelism (DeepSpeed's pipeline engine has no ring attention).
std::vector<Precision> export_precisions(ExportTarget t);
bool export_runs_cp(ExportTarget t);
// The lowest ZeRO level the target runs with cp > 1: torchtitan shards the whole state over the cp ranks
// (FSDP, ZeRO-3) whenever cp > 1; 0 for the others.
int export_min_zero_with_cp(ExportTarget t);
// The rank order the target places ranks in, when it has only one.
std::optional<RankOrder> export_rank_order(ExportTarget t);
// BadInput naming --zero when the target cannot shard as `zero` says (with dp > 1): Megatron-LM's
// distributed optimizer is ZeRO-1, DeepSpeed's pipeline engine takes stages 0 and 1, torchtitan
// replicates or shards weights with gradients (FSDP).
void check_zero_level(ExportTarget t, int zero);
// BadInput naming the option when the target does not keep the model state at the widths `pc` asks for:
// bf16 gradients (--grad-reduce-in-bf16) and the precision-aware optimizer are Megatron-LM's alone; FSDP
// gradients synced other than as torchtitan syncs them (--fsdp-grad-sync) are no target's.
void check_state_widths(ExportTarget t, const ParallelConfig& pc);
// BadInput naming --activation-func-fp8-input-store when it is set: no target's launch sets it.
void check_activation_storage(ExportTarget t, const Workload& w);

// The expert parallelism the target runs for `model`, narrowing `space` to it: DeepSpeed's pipeline engine
// runs no MoE layers (BadInput naming --export); Megatron-LM folds experts over ranks in its default order
// (tp-cp-ep-dp-pp: --use-tp-pp-dp-mapping leaves the experts only the tp x cp ranks, so the order is fixed);
// torchtitan runs ep with etp 1 (expert tensor parallelism was removed in April 2026). No-op for dense models.
void restrict_experts(ExportTarget t, const Model& model, SearchSpace& space);

// Every file name export_plan may write for the target (some only for some plans), so that a command can
// check them before it searches.
std::vector<std::string> export_file_names(ExportTarget t);

// BadInput "--export <target>: ..." when the plan uses something the target cannot run.
// `dir` is the folder the files will be written to (files may name each other by path).
std::vector<ExportFile> export_plan(ExportTarget t, const Evaluation& plan, const std::string& dir);

}  // namespace pw
