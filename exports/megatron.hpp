#pragma once
// Megatron-LM command-line arguments for a plan (megatron/training/arguments.py). An arbitrary split is
// written as --pipeline-model-parallel-layout (megatron/core/transformer/pipeline_parallel_layer_layout.py):
// "E" the embedding, "t" a transformer layer, "L" the loss (final norm, output layer, loss), "|" between
// stages, "x*k" and "(...)*k" repeat, commas are cosmetic; entry i of the flattened list is virtual stage
// i / pp of pipeline rank i mod pp, which is pipewright's stage i under loop placement.
#include <string>
#include <vector>

#include "core/model.hpp"
#include "core/stage_costs.hpp"
#include "exports/exports.hpp"
#include "sim/scenario.hpp"

namespace pw {

// The schedules Megatron-LM runs: 1f1b, interleaved (--num-virtual-stages-per-pipeline-rank or a layout of
// pp x vpp stages) and bfs (interleaved with --microbatch-group-size-per-virtual-pipeline-stage m).
std::vector<std::string> megatron_schedules();

// The layout string of a split, with repetition where it makes the string shorter. BadInput when the
// model is not embedding, transformer blocks, head.
std::string megatron_layout(const Model& model, const std::vector<LayerRange>& ranges);

// Reads a layout as Megatron-LM does (commas dropped, "(...)*k" then "x*k" unrolled, split at "|") into
// pipewright layer ranges. BadInput naming the layout for a character other than E, t, L, an empty stage,
// an embedding or loss out of place, or a transformer layer count other than the model's.
std::vector<LayerRange> parse_megatron_layout(const std::string& layout, const Model& model);

// The arguments as a flat list ("--tensor-model-parallel-size", "8", ...).
std::vector<std::string> megatron_arguments(const Evaluation& plan);

// megatron_args.sh: a bash array of the arguments, with the prediction as a comment.
ExportFile megatron_export(const Evaluation& plan);

}  // namespace pw
