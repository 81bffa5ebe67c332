#pragma once
// Contiguous split of a model's layers into stages (p x v chunks) that minimises the pipeline's bottleneck
// (the slowest stage including its boundary transfers) under each stage's memory limit, exactly (dynamic
// programming over prefix sums), for chains and for layer graphs whose edges cross stage boundaries, on
// GPUs of different speeds. Among the splits that share the optimal bottleneck, the one with the best
// simulated step time is returned.
//
// The bottleneck of a split is the largest stage_time (planner/partition_problem.hpp): a stage's F + B + W
// for one micro-batch on its own GPU type, plus, on every stage but the last, latency + bytes / bandwidth
// of the activation it sends to the next stage and of the gradient that comes back (bytes: everything
// crossing the boundary, graph edges included).
//
// Memory: a rank's peak is its model state (and the GPU's reserve) plus the largest activation holding
// the schedule reaches on it (planner/partition_problem.hpp: Holding), exactly what the simulator reports.
//   One chunk per rank (gpipe, 1f1b, zb-h1): the peak of a stage depends on its own layers only, so the
//   dynamic programme over (stage, prefix) with the memory test per stage is exact.
//   v chunks per rank (interleaved): a rank's peak sums its chunks, which a prefix DP cannot see. The DP
//   runs with each chunk's own peak as a necessary condition (a lower bound T_lo of the optimum); if a
//   split tied at T_lo fits exactly, it is optimal. Otherwise splits that fit are found by DPs with the
//   rank's budget split among its chunks (sufficient conditions), then a branch and bound over the
//   splits (stage by stage, pruned by the DP's suffix bounds and each rank's partial memory) improves
//   them to the optimum, or stops after `search_nodes` nodes with proven_optimal false.
//
// Ties: every split whose bottleneck is within 1e-9 (relative) of the optimum is bottleneck-optimal. Up
// to `max_ties` of them, the best by the sum of stage times (the fill and drain a micro-batch sees) then
// the sum of their squares, are simulated, the fastest first (earlier in that order on equal step times).
//
// The least bottleneck is not the least step time: a split with a slower stage can fill and drain faster
// (on 12-layer models up to 3% with one chunk per rank, 20% with two). So the best tied split, the uniform
// split and DeepSpeed's parameters split start a branch and bound over every contiguous split by simulated
// step time (planner/fastest_split.hpp), which simulates only those whose lower bound beats the fastest so
// far: the result is the fastest split that fits, never slower than those three, and proven so
// (fastest_proven) when the search ends within its budgets.
#include <vector>

#include "core/cost_model.hpp"
#include "core/stage_costs.hpp"
#include "planner/partition_problem.hpp"
#include "schedules/ir.hpp"
#include "sim/scenario.hpp"

namespace pw {

struct PartitionResult {
  std::vector<LayerRange> ranges;  // per stage
  double bottleneck_s = 0;         // slowest stage's F + B + W (+ transfers) per micro-batch
  double step_time_s = 0;          // simulated, of the chosen split (0 when options.simulate is false)
  bool fits = true;                // every rank's simulated peak within its GPU memory
  // Added by the partitioner's author:
  double lower_bound_s = 0;        // no split has a smaller bottleneck
  bool proven_optimal = true;      // bottleneck_s is the optimum (false: the branch and bound ran out)
  int candidates = 0;              // bottleneck-optimal splits ranked (simulated when options.simulate)
  // How many splits reach the optimal bottleneck (a double: it can be huge). With several chunks per
  // rank, those whose chunks pass the memory test one by one: an upper bound.
  double tied_splits = 0;
  double min_bottleneck_s = 0;     // the least bottleneck of any split that fits (bottleneck_s can exceed it)
  // With options.fastest: the branch and bound over all splits finished, so no split that fits has a
  // smaller simulated step time; splits simulated on the way (the tied ones included).
  bool fastest_proven = false;
  int simulated = 0;
  // With per-stage recompute (workload.recompute PerStage): each stage's level, the lightest that fits.
  std::vector<Recompute> stage_recompute;
};

struct PartitionOptions {
  int max_ties = 64;              // bottleneck-optimal splits ranked by simulation
  bool simulate = true;  // false: no simulation; the first tied split by the secondary order
  long search_nodes = 20000;      // branch-and-bound nodes (several chunks per rank, memory binding): ~2 us each
  const Schedule* schedule = nullptr;  // the scenario's compute-only schedule, when the caller has it
  const std::vector<std::vector<Holding>>* holdings = nullptr;  // activation_holdings(*schedule), likewise
  const LayerWorks* work = nullptr;  // each layer's work under the scenario's workload, likewise
  // With per-stage recompute: each layer's work at none, selective and full, likewise (null where not).
  std::vector<const LayerWorks*> level_work;
  // With simulate: search every split by simulated step time (planner/fastest_split.hpp), starting from the
  // best tied split and the uniform and parameters splits; within these budgets (branch-and-bound nodes,
  // splits simulated), else the best found.
  bool fastest = true;
  // When no split fits: BadInput naming the smallest need (false: a bare BadInput, without the search for
  // that need, for callers that only ask whether a split fits).
  bool explain_no_fit = true;
  long fastest_nodes = 200000;
  int fastest_judged = 256;
};

// The best split for a resolved scenario (its pp, vpp, schedule, micro-batches, workload); ignores
// scenario.split / scenario.ranges. Throws BadInput when no split fits in memory, naming the smallest
// stage's need and the GPU's memory.
PartitionResult best_partition(const Scenario& resolved, const CostModel& cost);
PartitionResult best_partition(const Scenario& resolved, const CostModel& cost, const PartitionOptions& options);

// Per-stage recompute: each stage's level under a given split (the lightest whose memory fits its GPU, else
// full); empty for any other recompute mode.
std::vector<Recompute> stage_recompute_for(const Scenario& resolved, const CostModel& cost,
                                           const std::vector<LayerRange>& ranges);

// The least memory the fullest rank can need over all splits (need_bytes - limit_bytes is minimal), with
// that rank's GPU memory: what the infeasibility message reports.
struct MemoryNeed {
  int rank = 0;
  double need_bytes = 0;
  double limit_bytes = 0;
  bool exact = true;  // false: several chunks per rank and the search ran out (need_bytes is then an upper bound)
};
MemoryNeed smallest_memory_need(const Scenario& resolved, const CostModel& cost, const PartitionOptions& options = {});

// The BadInput text for a scenario whose smallest stage does not fit:
// "the smallest stage needs 97.2 GB with tp=8, pp=64 and recompute full; a plan may use 78.4 GB (80.0 GB less the 2% headroom); use ..."
std::string memory_need_message(const Scenario& resolved, const MemoryNeed& need);

}  // namespace pw
