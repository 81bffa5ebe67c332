#pragma once
// What an export target's limits cost a plan: the search with --export keeps to what the framework runs
// (its schedules, recomputation, precisions, rank order, context and expert parallelism); the same search
// without those limits says what they ruled out and how much faster that was.
#include <optional>
#include <string>

#include "exports/exports.hpp"
#include "planner/search.hpp"

namespace pw {

struct TargetCost {
  std::optional<Plan> outside;  // the fastest plan without the target's limits, when faster than plan 1
  double gain = 0;              // 1 - its step time / plan 1's
  std::string why;              // what of it the target cannot run: "Megatron-LM has no dualpipev schedule"
};

// `open`: the space before the target narrowed it; `best`: plan 1 of the narrowed search.
TargetCost target_cost(ExportTarget target, const Scenario& base, const SearchSpace& open, const Plan& best,
                       const CostModel& cost, const SearchOptions& options);

// One line: "--export megatron: the search kept to what Megatron-LM runs; ..." with the cost.
std::string target_cost_text(ExportTarget target, const TargetCost& c);

}  // namespace pw
