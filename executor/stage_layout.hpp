#pragma once
// The checks every compute backend makes of what it is asked to run: the micro-batch shape against the
// model, and the stages' layer ranges against its layers.
#include <vector>

#include "core/model.hpp"
#include "core/stage_costs.hpp"

namespace pw {

// The sequence length to run (the model's when `seq_len` is 0); BadInput naming --micro-batch-size or
// --seq-len for a shape the model cannot take.
int checked_seq_len(const Model& model, int micro_batch_size, int seq_len);

// BadInput unless the ranges are contiguous, non-empty and cover every layer.
void check_stage_layers(const Model& model, const std::vector<LayerRange>& stage_layers);

}  // namespace pw
