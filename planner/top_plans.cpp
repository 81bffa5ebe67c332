#include "planner/top_plans.hpp"

#include <algorithm>
#include <limits>

namespace pw {
namespace {

double step_time(const Plan& p) { return p.evaluation.metrics.step_time_s; }
double peak_memory(const Plan& p) { return p.evaluation.metrics.peak_memory_bytes; }

bool better(const Plan& a, const Plan& b) {
  if (step_time(a) != step_time(b)) return step_time(a) < step_time(b);
  return config_less(a.config, b.config);
}

bool twins(const Plan& a, const Plan& b) {
  return step_time(a) == step_time(b) && peak_memory(a) == peak_memory(b) &&
         same_but_order_schedule_and_recompute(a.config, b.config);
}

}  // namespace

bool preferred(const Plan& a, const Plan& b) {
  if (a.config.pp != b.config.pp) return a.config.pp < b.config.pp;
  if (peak_memory(a) != peak_memory(b)) return peak_memory(a) < peak_memory(b);
  return better(a, b);
}

TopPlans::TopPlans(int top, double prefer_within)
    : top_(static_cast<size_t>(std::max(top, 1))), prefer_within_(std::max(prefer_within, 0.0)) {}

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
  // The threshold only falls as plans come, so every plan at or under the final one is still here.
  const double limit = threshold();
  size_t keep = top_;
  while (keep < kept_.size() && step_time(kept_[keep]) <= limit) ++keep;
  kept_.resize(keep);
}

double TopPlans::threshold() const {
  if (kept_.size() < top_) return std::numeric_limits<double>::infinity();
  return std::max(step_time(kept_[top_ - 1]), step_time(kept_.front()) * (1 + prefer_within_));
}

void TopPlans::sort() { std::sort(kept_.begin(), kept_.end(), better); }

std::vector<Plan> TopPlans::take(std::optional<Plan>* passed_over) {
  sort();
  if (!kept_.empty()) {
    const double near = step_time(kept_.front()) * (1 + prefer_within_);
    const auto last_near = std::find_if(kept_.begin(), kept_.end(), [&](const Plan& p) { return step_time(p) > near; });
    std::optional<Plan> fastest;
    if (passed_over) fastest = kept_.front();
    std::sort(kept_.begin(), last_near, preferred);
    if (passed_over && !(kept_.front().config == fastest->config)) *passed_over = std::move(fastest);
  }
  if (kept_.size() > top_) kept_.resize(top_);
  return std::move(kept_);
}

}  // namespace pw
