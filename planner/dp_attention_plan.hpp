#pragma once
// The serving planner's data-parallel attention plans for a mixture of experts (serving/dp_attention_serving.hpp):
// groups of dp engines of tp GPUs (tp a power of two inside a node dividing the attention heads, at least 2
// engines) with the routed experts spread over each group's dp x tp GPUs, where that divides the experts (and the
// redundant expert slots, ServingConfig::redundant_experts) and the GPUs; the groups are replicas, each taking every
// replicas-th request.
#include <vector>

#include "planner/serving_jobs.hpp"
#include "planner/serving_plan.hpp"

namespace pw {

struct DpAttentionShape {
  int tp = 1, dp = 2, groups = 1;
};
// The groups of `gpus` GPUs the planner tries (the rule above), the redundant expert slots engine_for's.
std::vector<DpAttentionShape> dp_attention_shapes(const Model& model, const Cluster& cluster, int gpus,
                                                  const ServingEngineFor& engine_for);

// The configurations to simulate (planner/serving_jobs.hpp), one a shape, in dp_attention_shapes' order; no floor:
// the experts' step waits on every engine's batch, which one request alone does not bound.
std::vector<ServingJob> dp_attention_jobs(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                                          const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                                          const ServingSlo& slo);

}  // namespace pw
