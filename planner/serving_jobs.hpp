#pragma once
// The serving planner's configurations simulated on a few threads, their outcomes kept in the configurations'
// order: the same plans, skips and ranking whatever the threads.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "planner/serving_leaders.hpp"
#include "planner/serving_plan.hpp"

namespace pw {

// One configuration: what `skipped` calls it, how to simulate it (BadInput: it cannot serve the workload),
// optionally what it cannot beat (ServingFloor), which lets the search drop it unsimulated, and what simulating
// it takes in layer-steps (planner/serving_plan_estimate.hpp), which the time limit counts. `refused`: why it
// cannot serve, known before any simulation (its prefill pool could not): skipped, not counted as considered.
struct ServingJob {
  std::string name;
  std::function<ServingPlan()> simulate;
  std::function<ServingFloor()> floor;
  double work = 0;
  std::string refused;
};

// Simulates every job that `leaders` does not exclude on its floor on up to thread_count(threads) threads, the
// lowest makespan floors first (the likely leaders early, so that the rest are dropped sooner), adding each plan to
// `leaders`; then counts each job as considered and appends its plan to out.plans, or "name: why" to
// out.skipped, in the jobs' order (a dropped job: neither). Errors other than BadInput are rethrown.
//
// serve plan's time limit, counted from the search's start (its prefill pools included).
struct ServingTimeLimit {
  double seconds = 0;  // 0: none
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

// With a limit the search keeps it as plan's does (planner/search.cpp): once a tenth of it has passed and the
// leaders hold their --top plans (else once half of it has), the jobs left that the leaders do not yet exclude, at
// the seconds a layer-step has taken so far here, must fit in the rest, or it stops with BadInput: "serve plan: <jobs left> would take about <duration>; the limit is <limit>;
// ... or pass --allow-large".
void run_serving_jobs(const std::vector<ServingJob>& jobs, int threads, ServingLeaders& leaders, ServingPlanResult& out,
                      const ServingTimeLimit& limit = {});

}  // namespace pw
