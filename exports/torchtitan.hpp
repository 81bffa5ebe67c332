#pragma once
// torchtitan configuration for a plan, in the three forms torchtitan has taken, each checked against its
// source (docs/planning.md#exports):
// - main (pytorch/torchtitan b5bcd76c, Aug 2026): a Python module whose function returns Trainer.Config
//   (torchtitan/trainer.py), run as `-m torchtitan.train --module pipewright_plan --config pipewright_plan`;
//   ParallelismConfig and TrainingConfig fields of torchtitan/config/configs.py (num_pp_microbatches,
//   num_tokens_per_microbatch_per_dp_rank, module_fqns_per_model_part with lm_head), FullAC or no
//   activation checkpointing, CUDA graphs off (trainer.py refuses them with pp or ep).
// - v0.2.2 (73a0e697, Feb 2026, the last release read from TOML with --job.config_file): the [parallelism],
//   [training] and [activation_checkpoint] keys of torchtitan/config/job_config.py, the output projection
//   named `output`, micro-batches as local_batch_size / pipeline_parallel_microbatch_size.
// - 0.3.0 (the PyPI release; branch release/0.3, 4f9e9a47, cut from main on Aug 18 2026, before main counted
//   micro-batches): main's Python form with configs.py's fields of then (pipeline_parallel_microbatch_size,
//   local_batch_size, global_batch_size, seq_len), each checked by the generated code before any is set,
//   run as `--module pipewright_plan_v0_3_0` (a module name: no dots).
// Stages go to ranks by the schedule's name (torchtitan/distributed/pipeline_parallel.py): V placement for
// ZBVZeroBubble and DualPipeV, loop placement for every other; a schedule PyTorch has no class for ships as
// a compute_only CSV (schedules/pytorch_csv.hpp) under the name that places its stages alike. Plans
// torchtitan cannot run as simulated are refused with the reason: ZeRO-1 or -2 (torchtitan replicates or
// shards weights, gradients and optimizer state together), selective recomputation (its selective
// checkpointing is op-level, not the attention core), fp8, MTP, expert tensor parallelism, the flex
// dispatcher, placements neither loop nor V, a sequence tp x 2 cp does not divide (0.3.0).
#include <string>
#include <vector>

#include "exports/exports.hpp"
#include "sim/scenario.hpp"

namespace pw {

// The name torch.distributed.pipelining's get_schedule_class gives the same order, or "" when it has none
// (the plan then ships its order as a CSV).
std::string torch_schedule_name(const Scenario& s);

// The module FQNs of each stage; `output` names the output projection (v0.2.2: "output", main: "lm_head").
std::vector<std::vector<std::string>> torchtitan_module_fqns(const Model& model, const std::vector<LayerRange>& ranges,
                                                             const std::string& output);

// pipewright_plan.py (main), torchtitan_v0.2.2.toml and pipewright_plan_v0_3_0.py, plus
// pipewright_schedule.csv when PyTorch has no class for the schedule (referenced as `dir`/pipewright_schedule.csv).
std::vector<ExportFile> torchtitan_export(const Evaluation& plan, const std::string& dir);

}  // namespace pw
