#pragma once
// The serving planner's disaggregated plans: the GPUs split into a prefill pool (a quarter, a half or three
// quarters of them) and a decode pool (the rest), each pool every engine shape that fills it with replicas
// (serving_engine_shapes) and, for a mixture of experts, every group of data-parallel attention engines that does
// (dp_attention_shapes), simulated by serving/disaggregated_serving.hpp. Each prefill pool is simulated once and
// tried with every decode pool.
#include <vector>

#include "planner/serving_jobs.hpp"
#include "planner/serving_plan.hpp"
#include "serving/disaggregated_serving.hpp"

namespace pw {

// The prefill pools' GPU counts tried: a quarter, a half and three quarters of `gpus`, where whole.
std::vector<int> prefill_pool_sizes(int gpus);

// A pool the planner tries on some GPUs: replicas of a tp x pp engine, or (dp > 1) groups of dp data-parallel
// attention engines of tp GPUs.
struct PoolShape {
  int tp = 1, pp = 1, dp = 1;
  ServingPool pool;
};
// The pools of `gpus` GPUs, single engines first, in serving_engine_shapes' and dp_attention_shapes' order.
std::vector<PoolShape> pool_shapes(const Model& model, const Cluster& cluster, const ServingEngineFor& engine_for,
                                   int gpus);

// The configurations to simulate (planner/serving_jobs.hpp): every prefill pool simulated first, here, on up to
// `threads` threads; then each with every decode pool of the rest, a job each (a pool that cannot serve: one
// job refused with its reason), in prefill_pool_sizes' and pool_shapes' order.
std::vector<ServingJob> disaggregated_jobs(const Model& model, const Cluster& cluster, const CostModel& cost, int gpus,
                                           const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests,
                                           const ServingSlo& slo, int threads);

}  // namespace pw
