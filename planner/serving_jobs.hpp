#pragma once
// The serving planner's configurations simulated on a few threads, their outcomes kept in the configurations'
// order: the same plans, skips and ranking whatever the threads.
#include <functional>
#include <string>
#include <vector>

#include "planner/serving_leaders.hpp"
#include "planner/serving_plan.hpp"

namespace pw {

// One configuration: what `skipped` calls it, how to simulate it (BadInput: it cannot serve the workload), and
// optionally what it cannot beat (ServingFloor), which lets the search drop it unsimulated.
struct ServingJob {
  std::string name;
  std::function<ServingPlan()> simulate;
  std::function<ServingFloor()> floor;
};

// Simulates every job that `leaders` does not exclude on its floor on up to thread_count(threads) threads, the
// lowest makespan floors first (the likely leaders early, so that the rest are dropped sooner), adding each plan to
// `leaders`; then counts each job as considered and appends its plan to out.plans, or "name: why" to
// out.skipped, in the jobs' order (a dropped job: neither). Errors other than BadInput are rethrown.
void run_serving_jobs(const std::vector<ServingJob>& jobs, int threads, ServingLeaders& leaders, ServingPlanResult& out);

}  // namespace pw
