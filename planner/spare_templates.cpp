#include "planner/spare_templates.hpp"

#include "core/failed_nodes.hpp"
#include "planner/failure_report.hpp"

namespace pw {

SearchSpace template_space(const SearchSpace& space, const Candidate& best) {
  SearchSpace t = space;
  t.tp = best.tp;
  t.cp = best.cp;
  t.ep = best.ep;
  t.etp = best.etp;
  t.precisions = {best.precision};
  return t;
}

std::vector<SpareTemplate> spare_templates(const Scenario& base, const SearchSpace& space, const SparePool& pool,
                                           int count, int gpus, const CostModel& cost, const SearchOptions& options,
                                           const Plan& best) {
  std::vector<SpareTemplate> out{SpareTemplate{best, gpus, std::nullopt}};
  const SearchSpace fixed = template_space(space, best.config);
  for (int k = 1; k < count; ++k) {
    Scenario left = base;
    left.cluster = without_last_nodes(base.cluster, pool.run_nodes, k);
    const int gpus_left = gpus - k * pool.gpus_per_node;
    const AfterFailure after = replan(left, fixed, gpus_left, cost, options, best, gpus);
    SpareTemplate t;
    t.gpus = gpus_left;
    if (after.ways.front().plan) {
      t.plan = after.ways.front().plan;
      t.way = after.ways.front().way;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace pw
