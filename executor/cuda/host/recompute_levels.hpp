#pragma once
// Which recompute level each layer of a CUDA run has, as the CPU backend decides it: the stage's level when
// one is given per stage (--stage-recompute), else the one level for every layer (--recompute). Only blocks
// recompute: Full keeps a block's input alone and reruns its forward at the start of B; Selective keeps all
// but the attention probabilities, which B rebuilds from Q and K.
#include <vector>

#include "core/stage_costs.hpp"
#include "core/workload.hpp"

namespace pw {

// One level per layer of a model of `layers` layers split into `stages`. BadInput naming --stage-recompute
// when `stage_levels` is not empty and not one level per stage.
std::vector<Recompute> layer_recompute_levels(int layers, const std::vector<LayerRange>& stages, Recompute level,
                                              const std::vector<Recompute>& stage_levels);

}  // namespace pw
