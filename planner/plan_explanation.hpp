#pragma once
// Why the best plan is the best: its step broken down (sim/step_breakdown.hpp), the constraint that binds
// it, and for each runner-up what it loses against it and why, in one line each.
#include <optional>
#include <string>
#include <vector>

#include "core/cost_model.hpp"
#include "planner/search.hpp"
#include "sim/step_breakdown.hpp"

namespace pw {

struct Loss {
  std::string part;  // "idle" (the rank's share of the bubble), "pp", "dp", "tp", "cp", "ep", "recompute", "optimizer" or "compute"
  double seconds = 0;
};

struct RunnerUp {
  int rank = 0;            // its row in the plan table (2, 3, ...)
  double loss_s = 0;       // its step minus the best plan's
  std::string differs;     // "tp=8 (not 4), vpp=6 (not 12)"
  Loss most;               // the part of the step that grew the most
  std::string line;        // all of it, in words
};

struct PlanExplanation {
  StepBreakdown step;
  // The plan's bubble: every pipeline rank's waits over ranks x step time (the table's column).
  double bubble_fraction = 0;
  int ranks = 0;
  // The largest part of the step besides compute, in words ("the micro-batch count: ..."), and a second
  // line when the fullest rank is within 10% of its GPU's memory ("memory: ...").
  std::vector<std::string> binding;
  std::vector<RunnerUp> runners_up;
  // Why plan 1 is as deep as it is and, when a near tie ranked it before a faster plan, why: "depth: ...",
  // "preferred: ..." (planner/top_plans.hpp).
  std::vector<std::string> choice;
};

// The parts of a breakdown by name, in the order they are shown.
std::vector<Loss> parts_of(const StepBreakdown& b);

// Explains plans[0] against the others. Simulates each plan once more (with free transfers).
// `fastest`: SearchResult::fastest, the faster plan a near tie within `prefer_within` ranked after plans[0].
PlanExplanation explain_plans(const std::vector<Plan>& plans, const CostModel& cost,
                              const std::optional<Plan>& fastest = std::nullopt, double prefer_within = kPreferWithin);

// Where two configurations differ, a's values first: "tp=8 (not 4), rank order tp-dp-pp (not tp-pp-dp)".
std::string describe_difference(const Candidate& a, const Candidate& b);

}  // namespace pw
