#pragma once
// DeepSpeed pipeline parallelism for a plan: ds_config.json (train_batch_size,
// train_micro_batch_size_per_gpu, gradient_accumulation_steps, the "pipeline" and
// "activation_checkpointing" sections) and, when the split is not what partition_method="uniform" gives,
// pipewright_partition.py: a PipelineModule subclass that builds exactly the plan's per-stage layers.
// DeepSpeed's engine runs its own 1F1B order (TrainSchedule), one model chunk per stage, and checkpoints
// whole layers (activation_checkpoint_interval), so only 1f1b plans with no or full recompute export.
#include <vector>

#include "planner/exports.hpp"
#include "sim/scenario.hpp"

namespace pw {

// Whether DeepSpeed's partition_method="uniform" over the model's layer list gives exactly these ranges.
bool deepspeed_uniform(const Model& model, const std::vector<LayerRange>& ranges);

// ds_config.json, plus pipewright_partition.py when the split is not uniform.
std::vector<ExportFile> deepspeed_export(const Evaluation& plan);

}  // namespace pw
