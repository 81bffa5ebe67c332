#pragma once
// DeepSpeed pipeline parallelism for a plan, as DeepSpeed's main branch reads it (edaa7221, Aug 2026):
// ds_config.json (train_batch_size = micro-batch x gradient_accumulation_steps x dp, ZeRO stage, bf16, and
// for full recomputation the pipeline's activation_checkpoint_interval) and pipewright_partition.py, whose
// pipeline_module(layers) builds the PipelineModule with the plan's stages: partition_method "uniform" or
// "parameters" when DeepSpeed's own method gives the plan's split, else a subclass that sets the bounds
// (no method takes them; the config's "stages" and "partition" keys are read by nothing). DeepSpeed's
// engine runs its own 1F1B order (TrainSchedule), one model chunk per stage, and checkpoints whole layers
// (activation_checkpoint_interval), so only 1f1b plans with no or full recompute export.
#include <vector>

#include "exports/exports.hpp"
#include "sim/scenario.hpp"

namespace pw {

// Whether DeepSpeed's partition_method="uniform" over the model's layer list gives exactly these ranges.
bool deepspeed_uniform(const Model& model, const std::vector<LayerRange>& ranges);

// ds_config.json and pipewright_partition.py.
std::vector<ExportFile> deepspeed_export(const Evaluation& plan);

}  // namespace pw
