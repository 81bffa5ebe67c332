#include "planner/search_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "schedules/generators.hpp"
#include "sim/simulation_estimate.hpp"

namespace pw {
namespace {

// The search keeps generated schedules up to this many actions (planner/search.cpp's cache), each an Action.
constexpr double kCachedActions = 20e6;
constexpr double kCachedBytesPerAction = 20;

}  // namespace

double candidate_actions(const Candidate& c) {
  return static_cast<double>(c.pp) * chunks_per_rank(c.schedule, c.vpp) * c.microbatches * 3;
}

WorkEstimate search_estimate(const std::vector<Candidate>& candidates, int threads) {
  WorkEstimate e;
  if (candidates.empty()) return e;
  const Candidate* largest = &candidates.front();
  double total = 0;  // every candidate's actions, for the cache
  for (const Candidate& c : candidates) {
    const double actions = candidate_actions(c);
    total += actions;
    if (actions > candidate_actions(*largest)) largest = &c;
  }
  const double most = candidate_actions(*largest);
  const double parallel = std::max(1, threads);
  e.work = fmt::format("{} candidates, the largest {} actions ({}, {} micro-batches)", with_commas(static_cast<std::int64_t>(candidates.size())),
                       format_count(most), describe(*largest), largest->microbatches);
  e.fix = "lower --global-batch-size or fix --micro-batch-size";
  e.bytes = std::min(parallel, static_cast<double>(candidates.size())) * most * kSimBytesPerAction +
            std::min(total, kCachedActions) * kCachedBytesPerAction +
            static_cast<double>(candidates.size()) * sizeof(Candidate);
  // No time: scoring every candidate counts 14 min for the README's 1024-GPU plan at a global batch of
  // 65,536, while the bounds drop most candidates unscored; so loose an upper end would refuse plans that
  // finish.
  return e;
}

WorkEstimate search_time_estimate(const SearchProgress& p) {
  WorkEstimate e;
  e.work = fmt::format("after {} and {} configurations ({} actions), the search's {} remaining ({} actions; {})",
                       format_duration(p.elapsed_s), with_commas(p.considered), format_count(p.considered_actions),
                       with_commas(p.left), format_count(p.left_actions),
                       p.bounded ? fmt::format("those under the step-time bound of its {} best plans", p.top)
                                 : fmt::format("fewer than {} plans scored to bound them", p.top));
  const double floor = kSearchSecondsPerAction / std::max(1, p.threads);
  const double rate = p.considered_actions > 0 ? std::max(p.elapsed_s / p.considered_actions, floor) : floor;
  e.seconds = p.elapsed_s + p.left_actions * rate;
  e.fix = "narrow the space (--tp, --pp, --micro-batch-size, --schedules, --recompute), lower --global-batch-size";
  return e;
}

}  // namespace pw
