#pragma once
// Capacity answers for a serving plan: the highest request rate whose SLO percentiles hold (serve plan
// --max-rate), found by bisection over Poisson rates with the same seed, so that the arrivals at every rate are
// the same draws scaled (a higher rate never meets limits a lower one missed, up to the simulation's queueing).
#include <functional>
#include <limits>
#include <vector>

#include "planner/serving_plan.hpp"

namespace pw {

// The highest rate in [low, high] at which meets(rate) holds, to within `relative` of it, bisecting on a log
// scale; 0 when even `low` misses; `high` when it meets. Needs 0 < low < high and 0 < relative < 1.
double highest_rate(const std::function<bool(double)>& meets, double low, double high, double relative);

// A plan's figures for these requests, whichever kind it is: one pool of tp x pp engines and replicas, groups
// of data-parallel attention engines, or separate prefill and decode pools.
ServingPlan evaluate_plan(const Model& model, const Cluster& cluster, const CostModel& cost,
                          const ServingEngineFor& engine_for, const ServingPlan& plan,
                          const std::vector<ServingRequest>& requests, const ServingSlo& slo);

// kUnboundedRate: the SLOs hold even with every request at once, so at any rate.
inline constexpr double kUnboundedRate = std::numeric_limits<double>::infinity();

// The highest Poisson rate at which `plan` meets `slo` (which must limit something) over `requests_at(rate)`
// (requests_at(0): every request at once), to 0.5%.
double max_serving_rate(const Model& model, const Cluster& cluster, const CostModel& cost,
                        const ServingEngineFor& engine_for, const ServingPlan& plan,
                        const std::function<std::vector<ServingRequest>(double rate)>& requests_at, const ServingSlo& slo);

}  // namespace pw
