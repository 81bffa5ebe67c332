#pragma once
// The GEMM shapes a model runs (core/layer_work.hpp's PhaseWork::gemms), distinct, over its layers' forward,
// input-gradient and weight-gradient phases at each micro-batch size on one GPU (tp 1): what `profile
// --kernels-out` times, so that the tables it writes answer the shapes the cost model will ask.
#include <vector>

#include "core/layer_work.hpp"
#include "core/model.hpp"

namespace pw {

// In the order first met (layer by layer, F, B, W), each shape once.
std::vector<GemmShape> model_gemm_shapes(const Model& model, const std::vector<int>& micro_batch_sizes, int seq_len);

}  // namespace pw
