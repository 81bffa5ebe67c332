#pragma once
// torchtitan configuration for a plan, in the keys of torchtitan's ParallelismConfig
// (torchtitan/config/parallelism.py) and TrainingConfig (torchtitan/config/training.py) of the generation
// that names the split pipeline_parallel_module_fqns_per_model_part and the micro-batch count
// num_pp_microbatches (older releases: pipeline_parallel_split_points, module_fqns_per_model_part).
// Module names are those of torchtitan's Llama: tok_embeddings, layers.N, norm, output.
#include <string>
#include <vector>

#include "planner/exports.hpp"
#include "sim/scenario.hpp"

namespace pw {

// The name torch.distributed.pipelining's get_schedule_class gives the same order, or "" when it has none
// (the plan then ships its order as a CSV).
std::string torch_schedule_name(const Scenario& s);

// The module FQNs of each stage.
std::vector<std::vector<std::string>> torchtitan_module_fqns(const Model& model, const std::vector<LayerRange>& ranges);

// torchtitan.toml, plus pipewright_schedule.csv (PyTorch's compute_only CSV, schedules/pytorch_csv.hpp;
// referenced as `dir`/pipewright_schedule.csv) when PyTorch has no class for the schedule.
std::vector<ExportFile> torchtitan_export(const Evaluation& plan, const std::string& dir);

}  // namespace pw
