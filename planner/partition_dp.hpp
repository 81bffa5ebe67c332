#pragma once
// Dynamic programmes over (stage, layer prefix) for the partitioner. Every stage s obeys a per-stage
// memory test, stage_memory(s, ...) <= cap[s]: with cap = the rank's GPU memory it is exact for one chunk
// per rank and a necessary condition for several; with the rank's memory split among its chunks it is a
// sufficient one. Stage times and memory only grow as a stage takes more layers, which the loops use to
// stop early.
#include <vector>

#include "core/stage_costs.hpp"
#include "planner/partition_problem.hpp"

namespace pw {

struct Split {
  std::vector<LayerRange> ranges;  // empty: no split passes the tests
  double value = 0;                // the programme's objective for it
};

// Each stage's memory cap: its rank's GPU memory.
std::vector<double> rank_caps(const PartitionProblem& p);

// lowest[s * (layers + 1) + i]: the first layer stage s can start at and still end before layer i within its
// cap (i when none can): the programmes' memory test, "start j fits", is j >= lowest. Filled for the (stage,
// end) pairs a split with every stage non-empty can have.
std::vector<int> lowest_starts(const PartitionProblem& p, const std::vector<double>& cap);

// The split with the smallest bottleneck (largest stage_time) under the caps. O(stages x layers^2) at
// worst, far less in practice: for each end the scan of starts stops once the stage alone is slower than
// the best found or over its cap.
// `lowest`: lowest_starts(p, cap) when the caller has it (below likewise).
Split min_bottleneck(const PartitionProblem& p, const std::vector<double>& cap, const std::vector<int>* lowest = nullptr);

// suffix[s][j]: the smallest bottleneck of stages s .. stages - 1 over layers [j, layers) under the caps
// (infinity when none); suffix[stages][layers] = 0. Row-major, (stages + 1) x (layers + 1).
std::vector<double> suffix_bottlenecks(const PartitionProblem& p, const std::vector<double>& cap);

// Up to `k` splits whose stages all have stage_time <= limit and pass the caps, the least by (sum of
// stage times, sum of their squares) first; `count` receives how many such splits there are in all
// (a double: it can be astronomically large).
std::vector<std::vector<LayerRange>> best_splits_within(const PartitionProblem& p, const std::vector<double>& cap,
                                                        double limit, int k, double* count = nullptr,
                                                        const std::vector<int>* lowest = nullptr);

// The split whose worst stage_memory(s) - cap[s] is least (one chunk per rank: the least excess of any
// rank over its GPU), and that value.
Split min_memory_excess(const PartitionProblem& p, const std::vector<double>& cap);

}  // namespace pw
