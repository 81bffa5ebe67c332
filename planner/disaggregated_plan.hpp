#pragma once
// The serving planner's disaggregated plans: the GPUs split into a prefill pool (a quarter, a half or three
// quarters of them) and a decode pool (the rest), each pool every engine shape that fills it with replicas
// (serving_engine_shapes), simulated by serving/disaggregated_serving.hpp. Each prefill pool is simulated once
// and tried with every decode pool.
#include <vector>

#include "planner/serving_leaders.hpp"
#include "planner/serving_plan.hpp"

namespace pw {

// The prefill pools' GPU counts tried: a quarter, a half and three quarters of `gpus`, where whole.
std::vector<int> prefill_pool_sizes(int gpus);

// Appends the plans (and the pairs of pools that could not serve, to `skipped`) to `out`, simulated on up to
// `threads` threads (planner/serving_jobs.hpp), those `leaders` excludes dropped unsimulated.
void add_disaggregated_plans(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                             const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                             const ServingSlo& slo, int threads, ServingLeaders& leaders, ServingPlanResult& out);

}  // namespace pw
