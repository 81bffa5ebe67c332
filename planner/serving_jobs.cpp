#include "planner/serving_jobs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
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

// serve plan's time limit kept while the jobs run (see run_serving_jobs): checked once, as the job at order
// position k starts, once a tenth of the limit has passed and the leaders hold --top plans (a rate measured here
// too), or half of it has; then the jobs from k on that the leaders do not exclude, at the seconds a layer-step has
// taken so far (the up-front rate until a job has finished), must fit in the rest.
class TimeCheck {
 public:
  TimeCheck(const ServingTimeLimit& limit, const std::vector<ServingJob>& jobs, const std::vector<size_t>& order,
            const std::vector<ServingFloor>& floors, const ServingLeaders& leaders, int threads)
      : limit_(limit), jobs_(jobs), order_(order), floors_(floors), leaders_(leaders), threads_(threads) {}

  // BadInput past the limit; every later call says the search stopped.
  void before(size_t k) {
    if (!(limit_.seconds > 0) || checked_.load()) return;
    const Clock::time_point now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - limit_.start).count();
    const double done = done_work_.load();
    const bool measured = done > 0 && leaders_.settled();
    if (elapsed < (measured ? kSearchCheckFraction : kServingLateCheckFraction) * limit_.seconds || checked_.exchange(true))
      return;
    long left = 0;
    double left_work = 0;
    for (size_t j = k; j < order_.size(); ++j) {
      const size_t i = order_[j];
      if (!jobs_[i].refused.empty() || leaders_.excludes(floors_[i])) continue;
      ++left;
      left_work += jobs_[i].work;
    }
    const double simulating = std::chrono::duration<double>(now - simulating_).count();
    const double per_work = done > 0 ? simulating / done : kSecondsPerLayerStep / std::max(1, threads_);
    const WorkEstimate so_far{"the search so far", 0, elapsed, kServingPlanFix};
    const WorkEstimate rest{fmt::format("{} of {} configurations that could still rank, about {} simulated layer-steps",
                                        with_commas(left), with_commas(static_cast<long>(jobs_.size())),
                                        format_count(std::round(left_work))),
                            0, left_work * per_work, kServingPlanFix};
    try {
      check_work("serve plan", {so_far, rest}, WorkLimits{std::numeric_limits<double>::infinity(), limit_.seconds});
    } catch (...) {
      stopped_ = true;
      throw;
    }
  }
  void after(double work) { done_work_.fetch_add(work); }
  bool stopped() const { return stopped_.load(); }

 private:
  const ServingTimeLimit& limit_;
  const std::vector<ServingJob>& jobs_;
  const std::vector<size_t>& order_;
  const std::vector<ServingFloor>& floors_;
  const ServingLeaders& leaders_;
  int threads_;
  const Clock::time_point simulating_ = Clock::now();  // the rate leaves out the floors, made before
  std::atomic<double> done_work_{0};
  std::atomic<bool> checked_{false}, stopped_{false};
};

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
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return floors[a].makespan_s < floors[b].makespan_s; });
  std::vector<std::optional<ServingPlan>> plans(jobs.size());
  std::vector<std::string> why(jobs.size());
  std::vector<char> dropped(jobs.size(), 0);
  TimeCheck time(limit, jobs, order, floors, leaders, thread_count(threads));
  parallel_for(threads, jobs.size(), [&](size_t k) {
    if (time.stopped()) return;  // the time limit refused the search: the other threads stop too
    const size_t i = order[k];
    if (!jobs[i].refused.empty()) return;
    if (leaders.excludes(floors[i])) {
      dropped[i] = 1;
      return;
    }
    time.before(k);
    try {
      plans[i] = jobs[i].simulate();
      leaders.add(*plans[i]);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      why[i] = e.what();
    }
    time.after(jobs[i].work);
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
