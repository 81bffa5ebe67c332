#include "planner/partitioner.hpp"

#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "core/special_values.hpp"
#include "core/units.hpp"
#include "planner/baseline_splits.hpp"
#include "planner/fastest_split.hpp"
#include "planner/partition_dp.hpp"
#include "planner/partition_problem.hpp"
#include "planner/partition_search.hpp"
#include "planner/search_bounds.hpp"
#include "schedules/generators.hpp"
#include "sim/pipeline_sim.hpp"

namespace pw {
namespace {

// Splits whose bottleneck is within this fraction of the optimum tie with it: identical blocks summed
// from different prefix offsets differ in their last bits.
constexpr double kTieTolerance = 1e-9;

double tie_limit(double t) { return t + kTieTolerance * std::fabs(t); }

Schedule scenario_schedule(const Scenario& s) { return make_schedule(schedule_spec(s)); }

bool fits_exactly(const PartitionProblem& p, const std::vector<LayerRange>& ranges) {
  for (int r = 0; r < p.ranks; ++r)
    if (p.rank_memory(r, ranges) > p.rank_limit[static_cast<size_t>(r)]) return false;
  return true;
}

// Splits of the rank's memory among its chunks, each giving per-stage caps under which any split
// fits (the chunks' own peaks and states sum to at least the rank's peak): equal shares, shares by
// each chunk's most held micro-batches, and the shares a reference split uses.
std::vector<std::vector<double>> budget_caps(const PartitionProblem& p, const std::vector<LayerRange>& reference) {
  std::vector<std::vector<double>> out;
  std::vector<double> equal, by_holding, by_use;
  std::vector<double> rank_use(static_cast<size_t>(p.ranks), 0.0), rank_holding(static_cast<size_t>(p.ranks), 0.0);
  std::vector<double> use(static_cast<size_t>(p.stages)), holding(static_cast<size_t>(p.stages));
  for (int s = 0; s < p.stages; ++s) {
    const int r = p.stage_rank[static_cast<size_t>(s)];
    const auto& pairs = p.chunk_holdings[static_cast<size_t>(r)][static_cast<size_t>(p.stage_chunk[static_cast<size_t>(s)])];
    int most = 1;
    for (const auto& pr : pairs) most = std::max(most, pr.first + pr.second);
    holding[static_cast<size_t>(s)] = most;
    use[static_cast<size_t>(s)] = reference.empty() ? 1.0
                                  : p.stage_memory(s, reference[static_cast<size_t>(s)].first, reference[static_cast<size_t>(s)].last + 1);
    rank_holding[static_cast<size_t>(r)] += holding[static_cast<size_t>(s)];
    rank_use[static_cast<size_t>(r)] += use[static_cast<size_t>(s)];
  }
  for (int s = 0; s < p.stages; ++s) {
    const size_t r = static_cast<size_t>(p.stage_rank[static_cast<size_t>(s)]);
    const double limit = p.rank_limit[r];
    const int chunks = static_cast<int>(p.chunk_holdings[r].size());
    equal.push_back(limit / chunks);
    by_holding.push_back(limit * holding[static_cast<size_t>(s)] / rank_holding[r]);
    by_use.push_back(rank_use[r] > 0 ? limit * use[static_cast<size_t>(s)] / rank_use[r] : limit / chunks);
  }
  out.push_back(std::move(by_use));
  out.push_back(std::move(by_holding));
  out.push_back(std::move(equal));
  return out;
}

double worst_excess(const PartitionProblem& p, const std::vector<LayerRange>& ranges) {
  double worst = -kInf;
  for (int r = 0; r < p.ranks; ++r) worst = std::max(worst, p.rank_memory(r, ranges) - p.rank_limit[static_cast<size_t>(r)]);
  return worst;
}

// The split whose fullest rank is least over its GPU. One chunk per rank: the DP, exact. Several: the
// budget-split DPs give splits (upper bounds), the chunks judged alone a lower bound, and the branch and
// bound closes the gap within its budget. `any_fit`: the caller asks only whether a split fits: the chunks
// judged alone say none does when even they are over, a budget split that fits ends it, and the branch and
// bound stops at the first that fits (its need that split's, not the least), cutting every branch as soon as
// a rank is over (it reaches any fitting split the least-excess search would within the same budget).
struct LeastMemory {
  MemoryNeed need;
  std::vector<LayerRange> ranges;
};

LeastMemory least_memory(const PartitionProblem& p, long node_budget, bool any_fit = false) {
  MemoryNeed need;
  const Split alone = min_memory_excess(p, rank_caps(p));  // exact for one chunk per rank, else a lower bound
  std::vector<LayerRange> ranges = alone.ranges;
  if (p.max_chunks > 1 && !(any_fit && alone.value > 0)) {
    const double lower = alone.value;
    double best = kInf;
    for (const std::vector<double>& budget : budget_caps(p, alone.ranges)) {
      const std::vector<LayerRange> r = min_memory_excess(p, budget).ranges;
      const double e = worst_excess(p, r);
      if (e < best) {
        best = e;
        ranges = r;
      }
      if (any_fit && best <= 0) break;
    }
    // The branch and bound closes what the budget splits leave: down to a fit, or to the lower bound.
    if (any_fit ? best > 0 : best > lower) {
      const SearchOutcome o = any_fit ? first_fitting_split(p, node_budget) : min_rank_excess(p, best, node_budget);
      need.exact = o.complete;
      if (!o.splits.empty()) ranges = o.splits.front();
    }
  }
  double worst = -kInf;
  for (int r = 0; r < p.ranks; ++r) {
    const double m = p.rank_memory(r, ranges), limit = p.rank_limit[static_cast<size_t>(r)];
    if (m - limit > worst) {
      worst = m - limit;
      need.rank = r;
      need.need_bytes = m;
      need.limit_bytes = limit;
    }
  }
  return LeastMemory{need, ranges};
}

bool fits(const MemoryNeed& need) { return need.need_bytes <= need.limit_bytes; }

[[noreturn]] void throw_no_fit(const Scenario& s, const MemoryNeed& need) {
  throw Error(ErrorKind::BadInput, memory_need_message(s, need));
}

// Where no message will name a need (PartitionOptions::explain_no_fit off): over memory is all the caller learns.
[[noreturn]] void throw_no_split_fits() { throw Error(ErrorKind::BadInput, "no split fits in memory"); }

// Simulates splits as evaluate() would simulate them: on the schedule's own ranks and stages (with copies, each
// copy's stages run the split's parts).
class SplitSimulator {
 public:
  SplitSimulator(const Scenario& s, const CostModel& cost, const PartitionProblem& p, const Schedule& schedule)
      : s_(s), cost_(cost), p_(p) {
    in_.schedule = lower(schedule);
    for (int r = 0; r < schedule.num_ranks(); ++r) {
      in_.rank_gpu.push_back(pipeline_rank_gpu(s.parallel, r));
      rank_limit_.push_back(s.cluster.memory_limit_at(in_.rank_gpu.back()));
    }
    in_.cluster = s.cluster;
    in_.cost = &cost;
    for (int st = 0; st < schedule.num_stages(); ++st)
      stage_gpu_.push_back(in_.rank_gpu[static_cast<size_t>(schedule.placement.rank_of(st))]);
    compute_only_ = &schedule;
  }

  std::vector<StageCost> costs(const std::vector<LayerRange>& ranges) const {
    return stage_costs(s_.model, p_.work_for(ranges), stage_ranges(*compute_only_, ranges), s_.parallel, s_.cluster, cost_,
                       stage_gpu_, p_.copies);
  }

  // The split's simulated step time and whether every rank's peak fits its GPU.
  std::pair<double, bool> step(const std::vector<LayerRange>& ranges) { return step(costs(ranges)); }
  std::pair<double, bool> step(std::vector<StageCost> stages) {
    in_.stages = std::move(stages);
    // zb-auto searches its order on the stage costs: each split gets the order evaluate() would run.
    if (order_from_costs(s_.schedule) && !s_.imported_schedule) in_.schedule = lower(evaluated_schedule(s_, in_.stages, cost_));
    const SimResult r = simulate(in_);
    bool fits = true;
    for (const RankStats& rs : r.ranks)
      if (rs.peak_memory_bytes > rank_limit_[static_cast<size_t>(rs.rank)]) fits = false;
    return {r.step_time_s, fits};
  }

  // A sharper bound than the branch and bound's, from the schedule itself (planner/search_bounds.hpp).
  double bound(const std::vector<StageCost>& stages) const {
    return step_time_bound(*compute_only_, stages, in_.rank_gpu, s_.cluster, cost_);
  }

 private:
  const Scenario& s_;
  const CostModel& cost_;
  const PartitionProblem& p_;
  SimInput in_;
  std::vector<int> stage_gpu_;
  std::vector<double> rank_limit_;
  const Schedule* compute_only_ = nullptr;
};

struct Choice {
  std::vector<LayerRange> ranges;
  double step_time_s = kInf;
  bool fits = true;
};

// Ranks the candidates by simulated step time (the first wins ties).
Choice simulate_best(SplitSimulator& sim, const std::vector<std::vector<LayerRange>>& candidates) {
  Choice best;
  for (const std::vector<LayerRange>& ranges : candidates) {
    const auto [step, fits] = sim.step(ranges);
    if (step < best.step_time_s) best = Choice{ranges, step, fits};
  }
  return best;
}

// Whether the branch and bound's bounds hold: not for a cost model's own time for an overlapped F&B pair
// (which may undercut its halves) nor for zb-auto (whose order, and so memory, follows each split's costs).
bool step_bounds_hold(const Scenario& s, bool composites, const std::vector<StageCost>& some_split) {
  if (order_from_costs(s.schedule) && !s.imported_schedule) return false;
  if (!composites) return true;
  for (const StageCost& c : some_split)
    if (c.overlapped_fb_s > 0) return false;
  return true;
}


// The fastest split by simulated step time: the best tied split, the uniform and the parameters splits
// start the branch and bound (planner/fastest_split.hpp), so that the result is never slower than they are.
Choice fastest_of_all(const Scenario& s, const PartitionProblem& p, const Schedule& schedule, SplitSimulator& sim,
                      Choice start, const PartitionOptions& options, PartitionResult& result) {
  for (const std::vector<LayerRange>& baseline : {uniform_split(s.model, p.stages), parameters_split(s.model, p.stages)}) {
    const auto [step, fits] = sim.step(baseline);
    if (fits && (!start.fits || step < start.step_time_s)) start = Choice{baseline, step, true};
  }
  FastestSplitOptions fo;
  // With two copies of the model each part's stage runs its copy's half of the micro-batches, on the pair's
  // ranks, and the chain through the parts is one copy's: the bounds read them so (planner/fastest_split.hpp).
  fo.microbatches = s.parallel.microbatches / p.copies;
  fo.node_budget = options.fastest_nodes;
  fo.judge_budget = options.fastest_judged;
  fo.composites = has_composites(schedule);
  if (!start.fits || !step_bounds_hold(s, fo.composites, sim.costs(start.ranges))) {
    result.fastest_proven = false;
    return start;
  }
  auto judge = [&](const std::vector<LayerRange>& ranges, double threshold) {
    if (!fits_exactly(p, ranges)) return kInf;
    std::vector<StageCost> stages = sim.costs(ranges);
    if (exceeds(sim.bound(stages), threshold)) return kInf;
    ++result.simulated;
    const auto [step, fits] = sim.step(std::move(stages));
    return fits ? step : kInf;
  };
  const FastestSplit f = fastest_split(p, fo, start.ranges, start.step_time_s, judge);
  result.fastest_proven = f.complete;
  if (f.step_time_s < start.step_time_s) start = Choice{f.ranges, f.step_time_s, true};
  return start;
}

}  // namespace

std::string memory_need_message(const Scenario& s, const MemoryNeed& need) {
  const ParallelConfig& pc = s.parallel;
  const bool full = s.workload.recompute == Recompute::Full;
  return fmt::format("the smallest stage needs {} with tp={}, pp={}{} and recompute {}; a plan may use {}; use a larger "
                     "--tp or --pp{}, or GPUs with more memory{}",
                     format_bytes(need.need_bytes), pc.tp, pc.pp, pc.vpp > 1 ? fmt::format(", vpp={}", pc.vpp) : "",
                     to_string(s.workload.recompute), s.cluster.memory_limit_text(need.limit_bytes),
                     full ? "" : ", --recompute full", s.cluster.memory_headroom > 0 ? ", or a smaller --memory-headroom" : "");
}

MemoryNeed smallest_memory_need(const Scenario& s, const CostModel& cost, const PartitionOptions& options) {
  std::optional<Schedule> own;
  const Schedule& schedule = options.schedule ? *options.schedule : own.emplace(scenario_schedule(s));
  ProblemOptions problem;
  problem.holdings = options.holdings;
  return least_memory(make_partition_problem(s, cost, schedule, problem), options.search_nodes).need;
}

std::vector<Recompute> stage_recompute_for(const Scenario& resolved, const CostModel& cost,
                                           const std::vector<LayerRange>& ranges) {
  if (resolved.workload.recompute != Recompute::PerStage) return {};
  return make_partition_problem(resolved, cost, scenario_schedule(resolved)).stage_levels(ranges);
}

PartitionResult best_partition(const Scenario& s, const CostModel& cost) { return best_partition(s, cost, PartitionOptions{}); }

PartitionResult best_partition(const Scenario& s, const CostModel& cost, const PartitionOptions& options) {
  if (options.max_ties < 1) throw_runtime("best_partition: max_ties is {}; it must be at least 1", options.max_ties);
  std::optional<Schedule> own;  // the caller's schedule is read in place
  const Schedule& schedule = options.schedule ? *options.schedule : own.emplace(scenario_schedule(s));
  ProblemOptions problem;
  problem.phases = options.simulate && options.fastest;
  problem.holdings = options.holdings;
  problem.work = options.work;
  problem.level_work = options.level_work;
  const PartitionProblem p = make_partition_problem(s, cost, schedule, problem);
  const std::vector<double> caps = rank_caps(p);

  PartitionResult result;
  // Each chunk judged alone: exact with one chunk per rank, a relaxation (a lower bound) with several.
  const std::vector<int> lowest = lowest_starts(p, caps);
  const Split relaxed = min_bottleneck(p, caps, &lowest);
  if (relaxed.ranges.empty()) {
    if (!options.explain_no_fit) throw_no_split_fits();
    throw_no_fit(s, least_memory(p, options.search_nodes).need);
  }
  result.lower_bound_s = relaxed.value;

  double optimum = relaxed.value;
  std::vector<std::vector<LayerRange>> tied;
  for (std::vector<LayerRange>& r : best_splits_within(p, caps, tie_limit(optimum), options.max_ties, &result.tied_splits, &lowest))
    if (p.max_chunks == 1 || fits_exactly(p, r)) tied.push_back(std::move(r));

  if (tied.empty()) {
    // Several chunks per rank, and their sum binds: find splits that fit, then the best.
    std::vector<LayerRange> incumbent;
    double bound = kInf;
    for (const std::vector<double>& budget : budget_caps(p, relaxed.ranges)) {
      const Split b = min_bottleneck(p, budget);
      if (!b.ranges.empty() && b.value < bound && fits_exactly(p, b.ranges)) {
        bound = b.value;
        incumbent = b.ranges;
      }
    }
    if (incumbent.empty()) {
      // No budget split fits: the split that needs the least memory either fits (and starts the search)
      // or shows that none does; where no message will name that need, the first split that fits will do.
      const LeastMemory least = least_memory(p, options.search_nodes, !options.explain_no_fit);
      if (!fits(least.need)) {
        if (!options.explain_no_fit) throw_no_split_fits();  // its need is not the least
        throw_no_fit(s, least.need);
      }
      incumbent = least.ranges;
      bound = p.bottleneck(incumbent);
    }
    const SearchOutcome better = improve_bottleneck(p, bound, options.search_nodes);
    if (!better.splits.empty()) {
      bound = better.value;
      incumbent = better.splits.front();
    }
    result.proven_optimal = better.complete || bound <= tie_limit(result.lower_bound_s);
    optimum = bound;
    tied = enumerate_within(p, tie_limit(optimum), options.max_ties, options.search_nodes).splits;
    if (tied.empty()) tied.push_back(incumbent);
    best_splits_within(p, caps, tie_limit(optimum), 1, &result.tied_splits, &lowest);
  }

  result.candidates = static_cast<int>(tied.size());
  result.min_bottleneck_s = optimum;
  if (options.simulate) {
    SplitSimulator sim(s, cost, p, schedule);
    Choice c = simulate_best(sim, tied);
    result.simulated = static_cast<int>(tied.size());
    if (options.fastest) c = fastest_of_all(s, p, schedule, sim, std::move(c), options, result);
    else result.fastest_proven = false;
    result.ranges = c.ranges;
    result.step_time_s = c.step_time_s;
    result.fits = c.fits;
  } else {
    result.ranges = tied.front();
    result.fits = fits_exactly(p, result.ranges);
    result.fastest_proven = false;
  }
  result.bottleneck_s = p.bottleneck(result.ranges);
  if (s.workload.recompute == Recompute::PerStage) result.stage_recompute = p.stage_levels(result.ranges);
  return result;
}

}  // namespace pw
