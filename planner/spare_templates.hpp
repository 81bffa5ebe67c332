#pragma once
// Spare-node templates (Oobleck's, Jang et al., SOSP 2023): the plan a run switches to with k of its
// nodes down and no spare to stand in, for k = 0, 1, ...: plan 1 itself, then the best of the ways on
// after a failure (planner/recovery_ways.hpp: drop replicas, re-split, re-plan), the re-plan kept to plan
// 1's sharding of a layer (tp, cp, ep, etp) and its precision while the pipeline, replicas, schedule and
// recompute follow the GPUs left.
#include <optional>
#include <vector>

#include "core/spare_nodes.hpp"
#include "planner/recovery_ways.hpp"
#include "planner/search.hpp"

namespace pw {

struct SpareTemplate {
  std::optional<Plan> plan;  // none when nothing fits
  int gpus = 0;              // what is left to it
  std::optional<RecoveryWay> way;  // how it goes on from plan 1 (none for plan 1 itself)
};

// What the templates keep of plan 1.
SearchSpace template_space(const SearchSpace& space, const Candidate& best);

// `count` templates; the run's last nodes go out first. `gpus`: plan 1's.
std::vector<SpareTemplate> spare_templates(const Scenario& base, const SearchSpace& space, const SparePool& pool,
                                           int count, int gpus, const CostModel& cost, const SearchOptions& options,
                                           const Plan& best);

}  // namespace pw
