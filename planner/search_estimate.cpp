#include "planner/search_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

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

std::vector<WorkEstimate> search_space_estimate(const Scenario& base, const SearchSpace& space, int threads) {
  long candidates = 0;
  std::optional<Candidate> largest;
  double most = 0;           // the largest's actions
  double total_actions = 0;  // every candidate's, for the cache
  std::set<LayerTableKey> tables;
  std::optional<LayerTableKey> last;  // runs of candidates share a table: one set lookup a run
  int most_vpp = 1;
  for_each_candidate(base, space, [&](const Candidate& c) {
    ++candidates;
    const double actions = candidate_actions(c);
    total_actions += actions;
    if (!largest || actions > most) {
      largest = c;
      most = actions;
    }
    const LayerTableKey key = layer_table_key(c);
    if (key != last) {
      tables.insert(key);
      last = key;
    }
    most_vpp = std::max(most_vpp, c.vpp);
  });
  const double parallel = std::max(1, threads);
  // The largest candidate's schedule on every thread and the schedule cache: what its simulations hold. No
  // time: scoring every candidate counts 14 min for the README's 1024-GPU plan at a global batch of 65,536,
  // while the bounds drop most candidates unscored; so loose an upper end would refuse plans that finish.
  WorkEstimate schedules;
  // for_each_candidate refuses an empty space: there is a largest.
  schedules.work = fmt::format("{} candidates, the largest {} actions ({}, {} micro-batches)", with_commas(candidates),
                               format_count(most), describe(*largest), largest->microbatches);
  schedules.fix = "lower --global-batch-size or fix --micro-batch-size";
  schedules.bytes = std::min(parallel, static_cast<double>(candidates)) * most * kSimBytesPerAction +
                    std::min(total_actions, kCachedActions) * kCachedBytesPerAction;
  // Every candidate's walk of the layers, and the tables of their costs.
  const double layers = base.model.num_layers();
  WorkEstimate walk;
  walk.work = fmt::format("{} configurations of {} layers each ({} cost tables, vpp up to {})", with_commas(candidates),
                          with_commas(base.model.num_layers()), with_commas(static_cast<std::int64_t>(tables.size())),
                          most_vpp);
  walk.bytes = static_cast<double>(candidates) * kSearchBytesPerCandidate +
               static_cast<double>(tables.size()) * layers * kLayerTableBytesPerLayer;
  walk.seconds = static_cast<double>(candidates) * layers * kSearchSecondsPerCandidateLayer / parallel;
  walk.fix = "narrow the space (--vpp, --pp, --schedules, --micro-batch-size, --recompute)";
  return {schedules, walk};
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
