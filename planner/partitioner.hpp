#pragma once
// Contiguous split of a model's layers into stages (p x v chunks) that minimises the pipeline's bottleneck
// (the slowest stage including its boundary transfers) under each stage's memory limit, exactly (dynamic
// programming over prefix sums), for chains and for layer graphs whose edges cross stage boundaries, on
// GPUs of different speeds. Among the splits that share the optimal bottleneck, the one with the best
// simulated step time is returned.
#include <vector>

#include "core/cost_model.hpp"
#include "core/stage_costs.hpp"
#include "sim/scenario.hpp"

namespace pw {

struct PartitionResult {
  std::vector<LayerRange> ranges;  // per stage
  double bottleneck_s = 0;         // slowest stage's F + B + W (+ transfers) per micro-batch
  double step_time_s = 0;          // simulated, of the chosen split
  bool fits = true;                // every rank's simulated peak within its GPU memory
};

// The best split for a resolved scenario (its pp, vpp, schedule, micro-batches, workload); ignores
// scenario.split / scenario.ranges. Throws BadInput when no split fits in memory, naming the smallest
// stage's need and the GPU's memory.
PartitionResult best_partition(const Scenario& resolved, const CostModel& cost);

}  // namespace pw
