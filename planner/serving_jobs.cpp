#include "planner/serving_jobs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/error.hpp"
#include "planner/parallel_for.hpp"

namespace pw {

void run_serving_jobs(const std::vector<ServingJob>& jobs, int threads, ServingLeaders& leaders, ServingPlanResult& out) {
  std::vector<ServingFloor> floors(jobs.size());
  parallel_for(threads, jobs.size(), [&](size_t i) {
    if (!jobs[i].floor) return;
    try {
      floors[i] = jobs[i].floor();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;  // its simulation will say why it cannot serve
    }
  });
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return floors[a].makespan_s < floors[b].makespan_s; });
  std::vector<std::optional<ServingPlan>> plans(jobs.size());
  std::vector<std::string> why(jobs.size());
  std::vector<char> dropped(jobs.size(), 0);
  parallel_for(threads, jobs.size(), [&](size_t k) {
    const size_t i = order[k];
    if (leaders.excludes(floors[i])) {
      dropped[i] = 1;
      return;
    }
    try {
      plans[i] = jobs[i].simulate();
      leaders.add(*plans[i]);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      why[i] = e.what();
    }
  });
  for (size_t i = 0; i < jobs.size(); ++i) {
    ++out.considered;
    if (!dropped[i]) ++out.simulated;
    if (plans[i]) out.plans.push_back(*plans[i]);
    else if (!dropped[i]) out.skipped.push_back(fmt::format("{}: {}", jobs[i].name, why[i]));
  }
}

}  // namespace pw
