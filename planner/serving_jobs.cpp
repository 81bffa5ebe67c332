#include "planner/serving_jobs.hpp"

#include <fmt/format.h>

#include <optional>

#include "core/error.hpp"
#include "planner/parallel_for.hpp"

namespace pw {

void run_serving_jobs(const std::vector<ServingJob>& jobs, int threads, ServingPlanResult& out) {
  std::vector<std::optional<ServingPlan>> plans(jobs.size());
  std::vector<std::string> why(jobs.size());
  parallel_for(threads, jobs.size(), [&](size_t i) {
    try {
      plans[i] = jobs[i].simulate();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      why[i] = e.what();
    }
  });
  for (size_t i = 0; i < jobs.size(); ++i) {
    ++out.considered;
    if (plans[i]) out.plans.push_back(*plans[i]);
    else out.skipped.push_back(fmt::format("{}: {}", jobs[i].name, why[i]));
  }
}

}  // namespace pw
