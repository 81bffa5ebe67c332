#pragma once
// The K best plans of a search, the same whatever order the threads score them in: configurations that
// differ only in rank order, schedule or recompute and give the same step time and peak memory share one
// row (Plan::twins), and every plan tied with the K-th stays until the end, because a twin of one of them
// may still come and which of them is left out must not depend on which finished first.
#include <cstddef>
#include <vector>

#include "planner/search.hpp"

namespace pw {

class TopPlans {
 public:
  explicit TopPlans(int top);

  void add(Plan plan);
  // The K-th best step time so far, in seconds; infinity while fewer than K plans are kept.
  double threshold() const;
  bool empty() const { return kept_.empty(); }
  // Every plan kept, ties past the K-th included, for the caller to improve in place; take() ranks them again.
  std::vector<Plan>& kept() { return kept_; }
  // The first K by step time, then configuration.
  std::vector<Plan> take();

 private:
  void sort();

  size_t top_;
  std::vector<Plan> kept_;  // sorted
};

}  // namespace pw
