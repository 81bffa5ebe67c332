#pragma once
// Turns a model, a layer split and a parallel configuration into per-stage costs: the numbers the
// simulator needs for every (stage, micro-batch) action.
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/model.hpp"
#include "core/workload.hpp"

namespace pw {

// Layers [first, last] (indices into Model::layers, inclusive) held by one stage (model chunk).
struct LayerRange {
  int first = 0;
  int last = -1;
  int count() const { return last - first + 1; }
};

struct StageCost {
  LayerRange layers;
  double forward_s = 0;
  double backward_input_s = 0;   // recomputation included
  double backward_weight_s = 0;
  double activation_bytes = 0;   // allocated at F, per micro-batch
  double weight_grad_bytes = 0;  // of activation_bytes, freed at W (the rest is freed at B)
  double output_bytes = 0;       // activation sent to the next stage (and its gradient sent back)
  double parameters = 0;         // on one GPU of this stage
  double model_state_bytes = 0;  // weights, gradients, optimizer state on one GPU
  double grad_reduce_s = 0;      // data-parallel reduction of this stage's gradients
  double optimizer_s = 0;        // optimizer step over this stage's parameters
};

// Splits the model's layers into `stages` contiguous ranges. `blocks_per_stage` gives the number of
// transformer blocks per stage (empty: balanced by forward+backward time); the embedding joins the
// first stage and the head the last. Throws BadInput when the split does not sum to the block count
// or a stage would be empty.
std::vector<LayerRange> split_layers(const Model& model, int stages, const std::vector<int>& blocks_per_stage,
                                     const std::vector<double>& layer_cost = {});

// Per-stage costs. `stage_gpu[s]` is the global rank of the first GPU (tp rank 0) of stage s's pipeline
// rank in data-parallel replica 0: it selects the GPU type and the tp/dp links.
std::vector<StageCost> stage_costs(const Model& model, const std::vector<LayerRange>& ranges, const Workload& w,
                                   const ParallelConfig& pc, const Cluster& cluster, const CostModel& cost,
                                   const std::vector<int>& stage_gpu);

}  // namespace pw
