#pragma once
// Branch and bound over contiguous splits, for ranks that hold several chunks: a rank's memory sums
// its chunks (stages r, r + p, ... under loop placement), which no prefix DP sees. Stages are chosen in
// order; a branch is cut when its stage alone reaches the bound, when the rest cannot be split below
// the bound even with each chunk judged alone (the DP's suffix bounds), or when a rank's chunks chosen
// so far already exceed its memory (the others only add). Exact when it finishes within its node budget.
#include <vector>

#include "core/stage_costs.hpp"
#include "planner/partition_problem.hpp"

namespace pw {

struct SearchOutcome {
  std::vector<std::vector<LayerRange>> splits;  // Improve: the best found (at most one); Enumerate: those found
  double value = 0;                             // Improve: its bottleneck, or memory excess for Memory
  bool complete = true;                         // false: stopped at the node budget
};

// The split with the least bottleneck below `bound` whose ranks all fit exactly, if any.
SearchOutcome improve_bottleneck(const PartitionProblem& p, double bound, long node_budget);

// Up to `cap` splits whose stages all have stage_time <= limit and whose ranks all fit exactly.
SearchOutcome enumerate_within(const PartitionProblem& p, double limit, int cap, long node_budget);

// The split whose worst rank_memory - rank_limit is least (below `bound`), and that excess.
SearchOutcome min_rank_excess(const PartitionProblem& p, double bound, long node_budget);

// The first split, in the search's order, whose ranks all fit exactly (rank_memory <= rank_limit), and its worst
// excess; none when no split fits (complete) or the budget ran out first (not complete). Deciding that none fits
// needs no least excess: every branch is cut as soon as a rank is over.
SearchOutcome first_fitting_split(const PartitionProblem& p, long node_budget);

}  // namespace pw
