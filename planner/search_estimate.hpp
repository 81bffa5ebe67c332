#pragma once
// What a configuration search takes, from its candidates before any is scored: each thread simulates one
// candidate at a time, so the largest schedule times the threads decides the memory.
#include <vector>

#include "core/layer_work.hpp"
#include "core/work_estimate.hpp"
#include "planner/search.hpp"

namespace pw {

// Actions one candidate's simulation keeps: F, B and W for every micro-batch on every stage.
double candidate_actions(const Candidate& c);

// Before a search holds anything, what its space costs in the count of its candidates and the model's layers.
// Looped schedules take every vpp up to layers / pp, so a model of many layers multiplies the candidates as
// well as the work on each: every candidate's step-time bound, split and memory bound walk its layers, and
// every distinct (tp, cp, micro-batch size, recompute, precision, ep, etp) gets a table of the layers' costs.
// The rates are the whole search's where those walks dominate (tiny-llama of 2,000 and 5,000 layers on 64
// GPUs, global batch 64, two threads on this VM: 172,655 candidates in 8.9 s and 302 MB, 427,807 in 48.6 s
// and 744 MB): 4.6e-8 s a candidate-layer on one thread, 1.7 kB a candidate (its entry, bounds and the
// schedules cached for it). Two parts: the largest schedule on every thread with the schedule cache, work
// "42,048 candidates, the largest 6,442,450,941 actions (tp=1, ..., 2147483647 micro-batches)", fix "lower
// --global-batch-size ..."; and the candidates' walk, work "8,508,811 configurations of 100,002 layers each
// (63 cost tables, vpp up to 50001)", fix "narrow the space (--vpp, ...)".
std::vector<WorkEstimate> search_space_estimate(const Scenario& base, const SearchSpace& space, int threads);
inline constexpr double kSearchSecondsPerCandidateLayer = 4.6e-8;
inline constexpr double kSearchBytesPerCandidate = 1.7e3;
// A LayerTable's bytes per layer: its LayerWork and six per-layer times (planner/search_bounds.hpp).
inline constexpr double kLayerTableBytesPerLayer = sizeof(LayerWork) + 6 * sizeof(double);

// The search's time cannot be known before it runs: the step-time bounds drop most candidates once the
// best plans are scored, and which they drop depends on those plans. So a search measures itself: once it
// has run a tenth of its time limit (or considered that many actions at kSearchSecondsPerAction, the
// deterministic trigger), it adds the candidates still under the bound of the plans it holds, at the rate
// measured so far, and stops when that exceeds the limit. The bound only falls, so this overestimates what
// is left, never beyond the unpruned remainder.
inline constexpr double kSearchSecondsPerAction = 0.3e-6;  // a considered candidate's actions, one thread
inline constexpr double kSearchCheckFraction = 0.1;

struct SearchProgress {
  double elapsed_s = 0;
  long considered = 0;      // candidates whose schedule was generated, split, bounded or simulated
  double considered_actions = 0;
  long left = 0;            // candidates not yet considered that the bound cannot drop yet
  double left_actions = 0;
  int top = 5;              // plans held; `bounded` false: fewer scored yet, nothing bounds the rest
  bool bounded = false;
  int threads = 1;
};

// Work "after 1.0 min and 25 configurations (108,000,000 actions), the search's 9,871 remaining (3.84e+09
// actions; those under the step-time bound of its 5 best plans)", seconds: the elapsed time plus the rest at
// the measured rate (at least kSearchSecondsPerAction over the threads), and the fix.
WorkEstimate search_time_estimate(const SearchProgress& p);

}  // namespace pw
