#pragma once
// The splits people get without a planner, to measure what the partitioner gains over them:
// Megatron-LM's default (the same number of transformer blocks per stage, the embedding on the first
// stage and the head on the last) and DeepSpeed's PipelineModule(partition_method="parameters").
#include <vector>

#include "core/model.hpp"
#include "core/stage_costs.hpp"

namespace pw {

// Transformer blocks spread evenly (earlier stages get the remainder's extra block last: split_layers
// without costs).
std::vector<LayerRange> uniform_split(const Model& model, int stages);

// Each layer's trainable parameters as DeepSpeed's PipelineModule._count_layer_params counts them, one
// entry per layer of Model::layers (the embedding, every block, the head with its own output matrix).
// Explicit layers count their parameter bytes.
std::vector<double> layer_parameter_counts(const Model& model);

// DeepSpeed's partition boundaries (deepspeed/runtime/utils.py): parts[s] is the first layer of stage s,
// parts[stages] the layer count.
//   partition_uniform: n / stages layers each, the first n mod stages stages one more.
//   partition_balanced: the linear-partition dynamic programme that minimises the heaviest stage's weight
//   minus the lightest's (ties to the latest cut), uniform when there are no more layers than stages.
std::vector<int> deepspeed_partition_uniform(int items, int parts);
std::vector<int> deepspeed_partition_balanced(const std::vector<double>& weights, int parts);

// partition_method="parameters" over the model's layers.
std::vector<LayerRange> parameters_split(const Model& model, int stages);

// Boundaries <-> ranges (stage s holds layers parts[s] .. parts[s + 1] - 1).
std::vector<LayerRange> ranges_from_parts(const std::vector<int>& parts);
std::vector<int> parts_from_ranges(const std::vector<LayerRange>& ranges);

}  // namespace pw
