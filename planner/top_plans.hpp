#pragma once
// The K best plans of a search, the same whatever order the threads score them in: configurations that
// differ only in rank order, schedule or recompute and give the same step time and peak memory share one
// row (Plan::twins), and every plan tied with the K-th stays until the end, because a twin of one of them
// may still come and which of them is left out must not depend on which finished first.
//
// Plans within `prefer_within` of the fastest step are near ties, which a practitioner would not tell
// apart by speed: they rank first, by fewer pipeline ranks, then less peak memory, then step time. To
// rank them every plan within that share of the fastest so far is kept too, past the K-th.
#include <cstddef>
#include <optional>
#include <vector>

#include "planner/search.hpp"

namespace pw {

class TopPlans {
 public:
  explicit TopPlans(int top, double prefer_within = 0);

  void add(Plan plan);
  // The step time, in seconds, above which a plan can no longer be among those kept: the K-th best so far,
  // or the fastest so far plus prefer_within when that is later; infinity while fewer than K plans are kept.
  double threshold() const;
  bool empty() const { return kept_.empty(); }
  // Every plan kept, ties past the K-th included, for the caller to improve in place; take() ranks them again.
  std::vector<Plan>& kept() { return kept_; }
  // The first K: the near ties of the fastest by preference, then the rest by step time and configuration.
  // `passed_over`, when given, receives the fastest plan when a near tie ranks another before it.
  std::vector<Plan> take(std::optional<Plan>* passed_over = nullptr);

 private:
  void sort();

  size_t top_;
  double prefer_within_;
  std::vector<Plan> kept_;  // sorted by step time, then configuration
};

// Whether `a` ranks before `b` among near ties: fewer pipeline ranks, then less peak memory, then the
// faster step, then configuration order.
bool preferred(const Plan& a, const Plan& b);

}  // namespace pw
