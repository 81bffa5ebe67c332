#pragma once
// The contiguous split with the least simulated step time, not only the least bottleneck: a branch and
// bound over splits, stage by stage, that simulates only the splits whose lower bound beats the fastest
// found so far.
//
// Bounds (each holds for any order a schedule gives its ranks, since a rank runs one action at a time, an
// action lasts at least its compute, and a tensor crossing ranks takes at least latency + bytes / bandwidth
// of the faster direction). With f, b, w a stage's F, B and W seconds (an F&B composite's halves counted at
// their compute alone: what it can never undercut), head(s) the forward chain of every stage before s with
// its transfers, and tail(s) the backward chain likewise:
//   stage s:  head(s) + m (f + b) + tail(s)    its m F and m B follow one another; the last B's gradient
//                                              then runs back through every earlier stage
//   rank r:   head(r) + m sum(f + b + w)       everything on the rank after its lowest stage's first input
//             head(r) + m sum(f + b) + tail(r)
//   the rest: head(k) + tail(k) + the remaining layers' f + b + (m - 1) x the last layer's f + b
//                                              (the last stage's bound, whatever the remaining stages hold)
// Partial sums only grow as a stage takes more layers, so the loop over a stage's end stops at the first
// end whose bound reaches the incumbent. A complete split whose bounds pass goes to `judge` (which may apply
// a sharper bound of its own before simulating).
#include <functional>
#include <vector>

#include "core/stage_costs.hpp"
#include "planner/partition_problem.hpp"

namespace pw {

struct FastestSplit {
  std::vector<LayerRange> ranges;  // the incumbent's unless a faster split was found
  double step_time_s = 0;
  bool complete = true;  // false: stopped at the node or judge budget; ranges is the best found
  long nodes = 0;
  int judged = 0;  // splits given to judge
};

struct FastestSplitOptions {
  int microbatches = 1;
  long node_budget = 200000;
  int judge_budget = 256;
  // Composite F&B actions: the halves count at their compute alone (the all-to-alls they may hide
  // excluded).
  bool composites = false;
};

// `judge(ranges, threshold)`: the split's simulated step time, or infinity when it does not fit or cannot
// beat `threshold`. The incumbent (a split that fits, with its simulated time) is returned unless a split
// strictly faster is found; ties keep the earlier.
FastestSplit fastest_split(const PartitionProblem& p, const FastestSplitOptions& options,
                           const std::vector<LayerRange>& incumbent, double incumbent_step_s,
                           const std::function<double(const std::vector<LayerRange>&, double)>& judge);

}  // namespace pw
