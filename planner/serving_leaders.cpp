#include "planner/serving_leaders.hpp"

#include <algorithm>

namespace pw {
namespace {

// A floor and a simulation sum the same times in other orders: a cap within this share of a leader's figure, or a
// floor within it of a limit, is kept, so that rounding never drops a configuration that ties.
constexpr double kRoundingShare = 1e-9;

}  // namespace

bool serving_plan_before(const ServingPlan& a, const ServingPlan& b, bool by_slo) {
  if (by_slo && a.meets_slo != b.meets_slo) return a.meets_slo;
  if (by_slo && a.goodput_rps != b.goodput_rps) return a.goodput_rps > b.goodput_rps;
  return a.metrics.output_tokens_per_s > b.metrics.output_tokens_per_s;
}

ServingLeaders::ServingLeaders(int top, const ServingSlo& slo, const std::vector<ServingRequest>& requests)
    : top_(top), slo_(slo), requests_(static_cast<double>(requests.size())) {
  for (const ServingRequest& r : requests) {
    outputs_ += static_cast<double>(r.output_tokens);
    if (r.output_tokens < 2) ++single_outputs_;
  }
}

bool ServingLeaders::excludes(const ServingFloor& floor) const {
  if (!(floor.makespan_s > 0) || top_ <= 0) return false;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<int>(best_.size()) < top_) return false;
  const ServingPlan& last = best_.back();
  const bool fewer_tokens = outputs_ / floor.makespan_s < last.metrics.output_tokens_per_s * (1 - kRoundingShare);
  if (!slo_.any()) return fewer_tokens;
  // A request meets the limits only where its floor does (a first token may come at once: no floor), and the
  // SLO percentile of the floors is no more than that of the times.
  const auto beyond = [&](double gap) { return slo_.tpot_s && gap > *slo_.tpot_s * (1 + kRoundingShare); };
  long good = single_outputs_;
  for (double gap : floor.token_gap_s) good += beyond(gap) ? 0 : 1;
  const bool may_meet = !beyond(percentile_of(floor.token_gap_s, slo_.percentile));
  // One that meets the SLOs ranks by good requests a second, at most `good` over the floor; one that cannot ranks
  // below a leader that does, and below one that does not by that cap, or with none good by output tokens.
  const bool fewer_good = static_cast<double>(good) / floor.makespan_s < last.goodput_rps * (1 - kRoundingShare);
  if (last.meets_slo) return !may_meet || fewer_good;
  return !may_meet && (fewer_good || (good == 0 && fewer_tokens));
}

bool ServingLeaders::settled() const {
  if (top_ <= 0) return true;
  const std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(best_.size()) >= top_;
}

void ServingLeaders::add(const ServingPlan& plan) {
  if (top_ <= 0) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto at = std::upper_bound(best_.begin(), best_.end(), plan, [&](const ServingPlan& a, const ServingPlan& b) {
    return serving_plan_before(a, b, slo_.any());
  });
  if (at - best_.begin() >= top_) return;
  best_.insert(at, plan);
  if (static_cast<int>(best_.size()) > top_) best_.pop_back();
}

}  // namespace pw
