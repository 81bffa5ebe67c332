#pragma once
// The configuration search: every (tp, cp, pp, dp, vpp, micro-batch size, schedule, recompute, precision)
// that uses the given GPUs and global batch, at the lowest ZeRO level that fits, split by the partitioner (the first of its bottleneck-optimal splits),
// scored by the discrete-event simulator (evaluate()), under the GPU memory limit. Sound lower bounds
// (planner/search_bounds.hpp) drop candidates that cannot enter the top K, so that the result equals
// exhaustive scoring; threads share a queue of candidates ordered by bound, and the result does not depend
// on their number. The K plans found then take the best of the partitioner's tied splits by simulation.
// docs/planning.md has the whole story.
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/cost_model.hpp"
#include "core/workload.hpp"
#include "sim/scenario.hpp"

namespace pw {

// What to search. An empty optional or list searches that dimension; a value fixes it.
struct SearchSpace {
  int gpus = 0;  // tp x cp x pp x dp
  // Configurations of at most `gpus` GPUs (what is left after failures): for each tp, cp and pp (the divisors
  // of what is left and the powers of two), the most replicas that fit and divide the global batch.
  bool up_to_gpus = false;
  std::optional<int> tp, cp, pp, dp, vpp, micro_batch_size;  // explicit-cost models search micro-batch size 1 only
  // Without a fixed cp: powers of two up to this (0: no limit) that leave each cp rank at least
  // kMinCpTokens tokens of the sequence.
  int max_cp = 0;
  // Expert parallelism for MoE models: a fixed ep / etp, or every ep dividing the routed experts and the
  // stage's tp x cp x dp GPUs (up to max_ep, 0: no limit), with etp 1 or tp. Dense models: 1.
  std::optional<int> ep, etp;
  int max_ep = 0;
  // ZeRO levels, ascending: each candidate takes the first whose plan fits in memory (a higher level only
  // adds communication). Empty: the base scenario's level.
  std::vector<int> zeros;
  // The lowest of those levels a candidate with cp > 1 may take (torchtitan shards the whole state over the
  // cp ranks, FSDP: 3); the levels below go to the next as if over memory. 0: any.
  int min_zero_with_cp = 0;
  std::vector<Precision> precisions;   // empty: the base workload's
  // Non-empty: only these micro-batch sizes (those a profile measured, so that measured and modelled
  // times are never ranked against each other).
  std::vector<int> micro_batch_sizes;
  std::vector<std::string> schedules;  // empty: every schedule_names() with one copy of the model
  std::vector<Recompute> recomputes;   // empty: none, selective, full, per-stage (explicit-cost models: none)
  std::optional<RankOrder> order;      // empty: both orders where they differ (pp > 1 and dp > 1)
  int max_tp = 0;                      // 0: the GPUs of a node
  int max_pp = 0;                      // 0: no limit
  // Pipelines deep enough to leave a rank fewer transformer blocks than this, on average, are not searched
  // (0: any depth up to one layer a stage).
  int min_blocks_per_rank = 0;
};

// cp is for long sequences: the search offers a cp only while each rank keeps this many tokens (a chunk's
// attention grows with its tokens squared, its K/V transfer linearly: across H100 nodes the transfer shows
// below ~1,400 tokens for 8:1 grouped-query attention, ~11,000 for multi-head). --cp fixes any other.
constexpr int kMinCpTokens = 4096;

// One point of the space. Ties in step time are broken by this order (tp, cp, ep, etp, pp, dp, vpp, micro-batch
// size, schedule, recompute, rank order, precision, ZeRO level), so that the result is the same whatever the threads did first.
struct Candidate {
  int tp = 1, pp = 1, dp = 1, vpp = 1;
  int micro_batch_size = 1;
  int microbatches = 1;  // from the global batch: G / (micro-batch size x dp)
  std::string schedule;
  Recompute recompute = Recompute::None;  // PerStage: the partitioner gives each stage its level
  RankOrder order = RankOrder::TpPpDp;
  int cp = 1;
  Precision precision = Precision::Bf16;
  int zero = 1;  // the level the plan runs at (SearchSpace::zeros)
  int ep = 1, etp = 1;

  friend bool operator==(const Candidate&, const Candidate&) = default;
};
bool config_less(const Candidate& a, const Candidate& b);
// What decides a candidate's table of layer costs (tp, cp, micro-batch size, recompute, precision, ep, etp): the
// search builds one table per key, and its estimate counts them.
using LayerTableKey = std::tuple<int, int, int, Recompute, Precision, int, int>;
inline LayerTableKey layer_table_key(const Candidate& c) {
  return std::make_tuple(c.tp, c.cp, c.micro_batch_size, c.recompute, c.precision, c.ep, c.etp);
}
// "tp=8, pp=16, dp=8, vpp=3, micro-batch size 1, interleaved and selective recompute" ("no recompute" for
// none), with ", cp=2", ", ep=8" and ", etp=2" after tp, ", fp8" and ", ZeRO-3" where they are not 1, bf16 and 1.
std::string describe(const Candidate& c);

// The base scenario (model, cluster, workload, global batch) with one candidate's degrees and schedule.
Scenario candidate_scenario(const Scenario& base, const Candidate& c);
// The configuration of a resolved scenario (a plan file's): candidate_scenario's inverse.
Candidate candidate_of(const Scenario& resolved);

// How a plan's layers are split over its stages.
enum class SplitMethod {
  Best,        // the partitioner's (best_partition)
  Uniform,     // the same number of transformer blocks per stage (Megatron's default)
  Parameters,  // DeepSpeed's partition_method="parameters" (planner/baseline_splits.hpp)
};
const char* to_string(SplitMethod m);

// The layer ranges a method gives for a resolved scenario.
std::vector<LayerRange> split_for(const Scenario& resolved, const CostModel& cost, SplitMethod method);

struct Plan {
  Candidate config;
  Evaluation evaluation;  // evaluation.scenario.ranges holds the split
  // Configurations that differ from `config` only in rank order, schedule or recompute and gave the same
  // step time and peak memory (both orders inside one node, every schedule at pp 1 with one micro-batch,
  // selective recompute with nothing to rebuild): one row of the top K, in config order after `config`,
  // which is the first of them.
  std::vector<Candidate> twins;
};

// Whether two configurations can be twins: equal in every setting but rank order, schedule and recompute.
bool same_but_order_schedule_and_recompute(const Candidate& a, const Candidate& b);

struct SearchStats {
  long candidates = 0;      // points of the space with valid degrees
  long memory_pruned = 0;   // dropped because a memory lower bound exceeds the GPU
  long bound_pruned = 0;    // dropped because a step-time lower bound exceeds the K-th best (the count
                            // depends on the thread count; the plans do not)
  long invalid = 0;         // rejected by the schedule generator or the scenario checks
  long simulated = 0;       // scored by evaluate()
  long same_as_uniform = 0; // per-stage recompute that gave every stage one level also searched uniformly
  long over_memory = 0;     // over memory by a bound that reads the schedule, by the partitioner (no split
                            // fits) or by the simulation
  double seconds = 0;
};

// The plan command's floor on transformer blocks per pipeline rank (--min-layers-per-stage): the deepest
// pipelines of published runs hold 2 (Megatron-LM's 1T-parameter GPT, 128 layers on pp 64, in Narayanan et
// al. 2021 and Korthikanti et al. 2022); deeper ones pay per-stage costs no run has measured.
constexpr int kMinBlocksPerRank = 2;

// Step times within 1% are inside the run-to-run spread of a real job and the cost model's own error, so a
// practitioner takes the shallower or emptier of two such plans (docs/planning.md#near-ties).
constexpr double kPreferWithin = 0.01;

struct SearchOptions {
  int top = 5;
  int threads = 0;     // 0: std::thread::hardware_concurrency()
  bool prune = true;   // false: score every candidate (the exhaustive reference)
  // Seconds the search may take by its own estimate (planner/search_estimate.hpp), 0: no limit. Over it:
  // BadInput "plan: the search, after ... would take about ...; the limit is ...".
  double time_limit_s = 0;
  // Plans whose step is within this share of the fastest rank first by fewer pipeline ranks, then less peak
  // memory (planner/top_plans.hpp): a deeper or fuller plan must be faster by more than this to lead. 0: by
  // step time alone.
  double prefer_within = kPreferWithin;
  // Called from the worker threads (serialised) with candidates done and the total.
  std::function<void(long done, long total)> progress;
};

struct SearchResult {
  std::vector<Plan> plans;  // best first, at most `top`
  // The fastest plan found, when a near tie with fewer pipeline ranks or less memory ranks before it.
  std::optional<Plan> fastest;
  SearchStats stats;
};

// Throws BadInput when the space is empty (naming the constraint that empties it) or when no candidate
// fits in memory (naming the configuration that comes closest, what it needs and what the GPU has).
SearchResult search_plans(const Scenario& base, const SearchSpace& space, const CostModel& cost,
                          const SearchOptions& options = {});

// Each plan re-evaluated with the uniform and the parameters split (what the plan gains over them),
// `threads` at once (0: hardware_concurrency).
struct SplitComparison {
  Evaluation uniform;
  Evaluation parameters;
};
std::vector<SplitComparison> compare_splits(const std::vector<Plan>& plans, const CostModel& cost, int threads = 0);

// Calls `visit` with every candidate of a space, each once, building no list (search_estimate counts a space
// before anything is held for it); BadInput as search_plans when there are none.
void for_each_candidate(const Scenario& base, const SearchSpace& space, const std::function<void(const Candidate&)>& visit);
// The candidates of a space, in config order; BadInput as search_plans when there are none.
std::vector<Candidate> enumerate_candidates(const Scenario& base, const SearchSpace& space);

}  // namespace pw
