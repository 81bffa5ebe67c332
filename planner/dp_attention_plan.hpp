#pragma once
// The serving planner's data-parallel attention plans for a mixture of experts (serving/dp_attention_serving.hpp):
// groups of dp engines of tp GPUs (tp a power of two inside a node dividing the attention heads, at least 2
// engines) with the routed experts spread over each group's dp x tp GPUs, where that divides the experts and
// the GPUs; the groups are replicas, each taking every replicas-th request.
#include <vector>

#include "planner/serving_leaders.hpp"
#include "planner/serving_plan.hpp"

namespace pw {

struct DpAttentionShape {
  int tp = 1, dp = 2, groups = 1;
};
// The groups of `gpus` GPUs the planner tries (the rule above).
std::vector<DpAttentionShape> dp_attention_shapes(const Model& model, const Cluster& cluster, int gpus);

// Appends the plans (and the shapes that could not serve, to `skipped`) to `out`, simulated on up to `threads`
// threads (planner/serving_jobs.hpp), each added to `leaders`.
void add_dp_attention_plans(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                            const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                            const ServingSlo& slo, int threads, ServingLeaders& leaders, ServingPlanResult& out);

}  // namespace pw
