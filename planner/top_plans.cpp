#include "planner/top_plans.hpp"

#include <algorithm>
#include <limits>

namespace pw {
namespace {

double step_time(const Plan& p) { return p.evaluation.metrics.step_time_s; }

bool better(const Plan& a, const Plan& b) {
  if (step_time(a) != step_time(b)) return step_time(a) < step_time(b);
  return config_less(a.config, b.config);
}

bool twins(const Plan& a, const Plan& b) {
  return step_time(a) == step_time(b) &&
         a.evaluation.metrics.peak_memory_bytes == b.evaluation.metrics.peak_memory_bytes &&
         same_but_order_schedule_and_recompute(a.config, b.config);
}

}  // namespace

TopPlans::TopPlans(int top) : top_(static_cast<size_t>(std::max(top, 1))) {}

void TopPlans::add(Plan plan) {
  for (Plan& kept : kept_)
    if (twins(kept, plan)) {
      // One row for both; the first in config order leads, whichever finished first.
      if (config_less(plan.config, kept.config)) std::swap(plan, kept);
      kept.twins.insert(kept.twins.end(), plan.twins.begin(), plan.twins.end());
      kept.twins.push_back(plan.config);
      std::sort(kept.twins.begin(), kept.twins.end(), config_less);
      sort();
      return;
    }
  kept_.insert(std::upper_bound(kept_.begin(), kept_.end(), plan, better), std::move(plan));
  if (kept_.size() <= top_) return;
  size_t keep = top_;
  while (keep < kept_.size() && step_time(kept_[keep]) == step_time(kept_[top_ - 1])) ++keep;
  kept_.resize(keep);
}

double TopPlans::threshold() const {
  return kept_.size() < top_ ? std::numeric_limits<double>::infinity() : step_time(kept_[top_ - 1]);
}

void TopPlans::sort() { std::sort(kept_.begin(), kept_.end(), better); }

std::vector<Plan> TopPlans::take() {
  sort();
  if (kept_.size() > top_) kept_.resize(top_);
  return std::move(kept_);
}

}  // namespace pw
