#pragma once
// The serving planner's configurations simulated on a few threads, their outcomes kept in the configurations'
// order: the same plans, skips and ranking whatever the threads.
#include <functional>
#include <string>
#include <vector>

#include "planner/serving_plan.hpp"

namespace pw {

// One configuration: what `skipped` calls it, and how to simulate it (BadInput: it cannot serve the workload).
struct ServingJob {
  std::string name;
  std::function<ServingPlan()> simulate;
};

// Simulates every job on up to thread_count(threads) threads, then counts each as considered and appends its
// plan to out.plans, or "name: why" to out.skipped, in the jobs' order. Errors other than BadInput are rethrown.
void run_serving_jobs(const std::vector<ServingJob>& jobs, int threads, ServingPlanResult& out);

}  // namespace pw
