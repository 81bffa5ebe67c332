#include "planner/serving_jobs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>

#include "core/error.hpp"
#include "core/work_estimate.hpp"
#include "planner/parallel_for.hpp"
#include "planner/search_estimate.hpp"
#include "planner/serving_plan_estimate.hpp"

namespace pw {
namespace {

using Clock = std::chrono::steady_clock;

// The latest the time limit is checked, as a share of it, when the leaders are not yet settled.
constexpr double kServingLateCheckFraction = 0.5;

// The time limit's one check (see run_serving_jobs): the jobs from order position `next` on that the leaders
// do not exclude now, at the seconds a layer-step has taken so far (the up-front rate until a job has finished).
void check_time_left(const std::vector<ServingJob>& jobs, const std::vector<size_t>& order,
                     const std::vector<ServingFloor>& floors, const ServingLeaders& leaders, size_t next,
                     double elapsed_s, double simulating_s, double done_work, int threads, double time_limit_s) {
  long left = 0;
  double left_work = 0;
  for (size_t k = next; k < order.size(); ++k) {
    const size_t i = order[k];
    if (!jobs[i].refused.empty() || leaders.excludes(floors[i])) continue;
    ++left;
    left_work += jobs[i].work;
  }
  const double per_work = done_work > 0 ? simulating_s / done_work : kSecondsPerLayerStep / std::max(1, threads);
  WorkEstimate so_far{"the search so far", 0, elapsed_s, kServingPlanFix};
  WorkEstimate rest{fmt::format("{} of {} configurations that could still rank, about {} simulated layer-steps", with_commas(left),
                                with_commas(static_cast<long>(jobs.size())), format_count(std::round(left_work))),
                    0, left_work * per_work, kServingPlanFix};
  check_work("serve plan", {so_far, rest}, WorkLimits{std::numeric_limits<double>::infinity(), time_limit_s});
}

}  // namespace

void run_serving_jobs(const std::vector<ServingJob>& jobs, int threads, ServingLeaders& leaders, ServingPlanResult& out,
                      const ServingTimeLimit& limit) {
  std::vector<ServingFloor> floors(jobs.size());
  parallel_for(threads, jobs.size(), [&](size_t i) {
    if (!jobs[i].floor || !jobs[i].refused.empty()) return;
    try {
      floors[i] = jobs[i].floor();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;  // its simulation will say why it cannot serve
    }
  });
  const Clock::time_point simulating = Clock::now();  // the rate so far leaves out the floors
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return floors[a].makespan_s < floors[b].makespan_s; });
  std::vector<std::optional<ServingPlan>> plans(jobs.size());
  std::vector<std::string> why(jobs.size());
  std::vector<char> dropped(jobs.size(), 0);
  std::atomic<bool> checked{false}, stop{false};
  std::mutex work_mutex;
  double done_work = 0;
  parallel_for(threads, jobs.size(), [&](size_t k) {
    if (stop.load()) return;  // the time limit refused the search: the other threads stop too
    const size_t i = order[k];
    if (!jobs[i].refused.empty()) return;
    if (leaders.excludes(floors[i])) {
      dropped[i] = 1;
      return;
    }
    if (limit.seconds > 0 && !checked.load()) {
      const Clock::time_point now = Clock::now();
      const double elapsed = std::chrono::duration<double>(now - limit.start).count();
      double done = 0;
      {
        std::lock_guard<std::mutex> lock(work_mutex);
        done = done_work;
      }
      // Before the leaders hold --top plans nothing is dropped yet and every job left would count: the check waits
      // for them (and a rate measured here), but no longer than half the limit.
      const bool measured = done > 0 && leaders.settled();
      if (elapsed >= (measured ? kSearchCheckFraction : kServingLateCheckFraction) * limit.seconds &&
          !checked.exchange(true)) {
        try {
          check_time_left(jobs, order, floors, leaders, k, elapsed, std::chrono::duration<double>(now - simulating).count(),
                          done, thread_count(threads), limit.seconds);
        } catch (...) {
          stop = true;
          throw;
        }
      }
    }
    try {
      plans[i] = jobs[i].simulate();
      leaders.add(*plans[i]);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      why[i] = e.what();
    }
    std::lock_guard<std::mutex> lock(work_mutex);
    done_work += jobs[i].work;
  });
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].refused.empty()) {
      out.skipped.push_back(fmt::format("{}: {}", jobs[i].name, jobs[i].refused));
      continue;
    }
    ++out.considered;
    if (!dropped[i]) ++out.simulated;
    if (plans[i]) out.plans.push_back(*plans[i]);
    else if (!dropped[i]) out.skipped.push_back(fmt::format("{}: {}", jobs[i].name, why[i]));
  }
}

}  // namespace pw
