#include "planner/search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "core/error.hpp"
#include "core/special_values.hpp"
#include "core/units.hpp"
#include "planner/baseline_splits.hpp"
#include "planner/block_list.hpp"
#include "planner/parallel_for.hpp"
#include "planner/parallel_sort.hpp"
#include "planner/partitioner.hpp"
#include "planner/search_bounds.hpp"
#include "planner/search_estimate.hpp"
#include "planner/top_plans.hpp"
#include "schedules/generators.hpp"

namespace pw {
namespace {

auto config_key(const Candidate& c) {
  return std::tie(c.tp, c.cp, c.ep, c.etp, c.pp, c.dp, c.vpp, c.micro_batch_size, c.schedule, c.recompute, c.order,
                  c.precision, c.zero);
}

// In increasing order; pairs d, n / d up to the square root, so that a batch of 2^31 - 1 takes 46,341 steps.
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (std::int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      low.push_back(static_cast<int>(d));
      if (d * d != n) high.push_back(static_cast<int>(n / d));
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

bool tp_shards_model(const Model& model, int tp) {
  if (!model.transformer) return tp == 1;
  const TransformerConfig& t = *model.transformer;
  return t.heads % tp == 0 && (t.kv_heads % tp == 0 || tp % t.kv_heads == 0);
}

// The (pp, dp) pairs for `room` GPUs per tp x cp: pp x dp = room; with SearchSpace::up_to_gpus (any count up
// to room), for each dp dividing the global batch the deepest pipeline that fits (more stages take less time
// each) and the deepest that divides the micro-batches or is a power of two, or with a fixed pp the most
// replicas.
std::vector<std::pair<int, int>> pipeline_shapes(int room, int global_batch, int layers, const SearchSpace& space) {
  std::vector<std::pair<int, int>> out;
  if (!space.up_to_gpus) {
    for (int pp : divisors(room)) out.emplace_back(pp, room / pp);
    return out;
  }
  if (space.pp) {
    int dp = 0;
    for (int d : divisors(global_batch))
      if (*space.pp * static_cast<long>(d) <= room && (!space.dp || d == *space.dp)) dp = d;
    out.emplace_back(*space.pp, dp);
    return out;
  }
  for (int dp : divisors(global_batch)) {
    if (dp > room || (space.dp && dp != *space.dp)) continue;
    const int deepest = std::min(layers, room / dp);
    out.emplace_back(deepest, dp);
    // Schedules that cycle micro-batches in groups of pp (interleaved) need pp to divide them: the deepest
    // such pipeline (at micro-batch size 1), and the deepest power of two.
    int divides = deepest;
    while ((global_batch / dp) % divides != 0) --divides;
    int power = 1;
    while (power * 2 <= deepest) power *= 2;
    for (int pp : {divides, power})
      if (std::find(out.begin(), out.end(), std::make_pair(pp, dp)) == out.end()) out.emplace_back(pp, dp);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string join_ints(const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

// The vpp values a schedule can run with pp ranks and `layers` layers: 1 for one chunk per rank, the
// schedule's own chunk count for the V family, 2 .. layers / pp for the looped ones that take --vpp.
// Several chunks on a single rank pipeline nothing (Megatron-LM rejects it), so those need pp >= 2.
std::vector<int> vpp_options(const std::string& schedule, int pp, int layers, const std::optional<int>& fixed) {
  const int at1 = chunks_per_rank(schedule, 1);
  const int at2 = chunks_per_rank(schedule, 2);
  std::vector<int> out;
  if (at1 == 1 && at2 == 1) {
    out.push_back(1);
  } else if (at1 == at2) {  // a fixed chunk count (the V family)
    if (pp >= 2 && pp * at1 <= layers) out.push_back(at1);
  } else if (pp >= 2) {
    for (int v = 2; pp * v <= layers; ++v) out.push_back(v);
  }
  if (fixed) {
    // A fixed --vpp 1 also selects the V family's default (it accepts 1 or 2 and runs 2).
    std::erase_if(out, [&](int v) { return v != *fixed && !(at1 == at2 && at1 > 1 && *fixed == 1); });
  }
  return out;
}

// The ZeRO levels a candidate may take, lowest first: the space's, or the base scenario's one.
std::vector<int> zero_levels_of(const Scenario& base, const SearchSpace& space) {
  return space.zeros.empty() ? std::vector<int>{base.parallel.zero} : space.zeros;
}

// The cp degrees to search: a fixed --cp (checked as resolve() would, so that the error names it once),
// else 1 and the powers of two up to max_cp that split the sequence in 2 cp chunks of kMinCpTokens / 2 or
// more, on models whose attention the cp ring runs (fused, no sliding window).
std::vector<int> cp_options(const Scenario& base, const SearchSpace& space) {
  if (space.cp) {
    if (*space.cp < 1) throw_bad_input("--cp: must be at least 1, got {}", *space.cp);
    if (space.gpus % *space.cp != 0) throw_bad_input("--gpus: {} is not a multiple of --cp {}", space.gpus, *space.cp);
    return {*space.cp};
  }
  std::vector<int> out{1};
  const Model& model = base.model;
  if (!model.transformer || !base.workload.flash_attention || model.transformer->attention_window > 0) return out;
  const long s = base.workload.seq_len > 0 ? base.workload.seq_len : model.default_seq_len();
  for (int cp = 2; s % (2 * cp) == 0 && s / cp >= kMinCpTokens && (space.max_cp == 0 || cp <= space.max_cp); cp *= 2)
    out.push_back(cp);
  return out;
}

// The (ep, etp) pairs a stage of tp x cp x dp GPUs can fold the model's experts into: fixed ones, checked as
// resolve() would, or every ep dividing both the routed experts and those GPUs (up to max_ep), with etp 1
// or, where it divides the experts' width, tp. {1, 1} for dense models.
std::vector<std::pair<int, int>> expert_options(const Model& model, const SearchSpace& space, int tp, int cp, int dp) {
  const bool moe = model.transformer && model.transformer->moe;
  if (!moe) {
    if ((space.ep && *space.ep != 1) || (space.etp && *space.etp != 1))
      throw_bad_input("--{}: model '{}' has no routed experts to spread; use 1 or a mixture-of-experts model",
                      space.ep && *space.ep != 1 ? "ep" : "etp", model.name);
    return {{1, 1}};
  }
  const MoeConfig& m = *model.transformer->moe;
  const long folded = static_cast<long>(tp) * cp * dp;
  std::vector<int> etps;
  if (space.etp) {
    etps.push_back(*space.etp);
  } else {
    etps.push_back(1);
    if (tp > 1 && m.expert_ffn % tp == 0) etps.push_back(tp);
  }
  std::vector<std::pair<int, int>> out;
  for (int ep : divisors(m.experts)) {
    if (space.ep && ep != *space.ep) continue;
    if (!space.ep && space.max_ep > 0 && ep > space.max_ep) continue;
    for (int etp : etps)
      if (m.expert_ffn % etp == 0 && folded % (static_cast<long>(ep) * etp) == 0) out.emplace_back(ep, etp);
  }
  return out;
}

// "125 or 150": the global batches nearest to G, below and above, that one of `dps` divides.
std::string nearest_batches_text(long G, const std::set<int>& dps) {
  long below = 0, above = std::numeric_limits<long>::max();
  for (int dp : dps) {
    if (G / dp > 0) below = std::max(below, G / dp * dp);
    above = std::min(above, (G / dp + 1) * dp);
  }
  return below > 0 ? fmt::format("{} or {}", below, above) : fmt::format("{}", above);
}

}  // namespace

bool config_less(const Candidate& a, const Candidate& b) { return config_key(a) < config_key(b); }

bool same_but_order_schedule_and_recompute(const Candidate& a, const Candidate& b) {
  Candidate x = a;
  x.order = b.order;
  x.recompute = b.recompute;
  x.schedule = b.schedule;
  return x == b;
}

std::string describe(const Candidate& c) {
  return fmt::format("tp={}{}{}{}, pp={}, dp={}{}, micro-batch size {}, {} and {} recompute{}{}{}", c.tp,
                     c.cp > 1 ? fmt::format(", cp={}", c.cp) : "", c.ep > 1 ? fmt::format(", ep={}", c.ep) : "",
                     c.etp > 1 ? fmt::format(", etp={}", c.etp) : "", c.pp, c.dp,
                     c.vpp > 1 ? fmt::format(", vpp={}", c.vpp) : "", c.micro_batch_size, c.schedule,
                     c.recompute == Recompute::None ? "no" : to_string(c.recompute),
                     c.order == RankOrder::TpPpDp ? "" : fmt::format(", rank order {}", to_string(c.order)),
                     c.precision == Precision::Fp8 ? ", fp8" : "", c.zero != 1 ? fmt::format(", ZeRO-{}", c.zero) : "");
}

const char* to_string(SplitMethod m) {
  switch (m) {
    case SplitMethod::Best: return "best";
    case SplitMethod::Uniform: return "uniform";
    case SplitMethod::Parameters: return "parameters";
  }
  return "?";
}

Candidate candidate_of(const Scenario& s) {
  Candidate c;
  c.tp = s.parallel.tp;
  c.cp = s.parallel.cp;
  c.ep = s.parallel.ep;
  c.etp = s.parallel.etp;
  c.pp = s.parallel.pp;
  c.dp = s.parallel.dp;
  c.vpp = s.parallel.vpp;
  c.micro_batch_size = s.workload.micro_batch_size;
  c.microbatches = s.parallel.microbatches;
  c.schedule = s.schedule;
  c.recompute = s.workload.recompute;
  c.order = s.parallel.order;
  c.precision = s.workload.precision;
  c.zero = s.parallel.zero;
  return c;
}

Scenario candidate_scenario(const Scenario& base, const Candidate& c) {
  Scenario s = base;
  s.parallel.tp = c.tp;
  s.parallel.cp = c.cp;
  s.parallel.ep = c.ep;
  s.parallel.etp = c.etp;
  s.parallel.zero = c.zero;
  s.workload.cp = c.cp;
  s.workload.ep = c.ep;
  s.workload.etp = c.etp;
  s.workload.precision = c.precision;
  s.parallel.pp = c.pp;
  s.parallel.dp = c.dp;
  s.parallel.vpp = c.vpp;
  s.parallel.microbatches = c.microbatches;
  s.global_batch_size = c.microbatches * c.micro_batch_size * c.dp;
  s.workload.micro_batch_size = c.micro_batch_size;
  s.workload.tp = c.tp;
  s.workload.recompute = c.recompute;
  s.parallel.order = c.order;
  s.schedule = c.schedule;
  s.split.clear();
  s.ranges.clear();
  s.stage_recompute.clear();
  return s;
}

std::vector<LayerRange> split_for(const Scenario& resolved, const CostModel& cost, SplitMethod method) {
  // One copy's parts (two copies of the model run the same split).
  const int stages =
      resolved.parallel.pp * chunks_per_rank(resolved.schedule, resolved.parallel.vpp) / schedule_copies(resolved);
  switch (method) {
    case SplitMethod::Uniform: return uniform_split(resolved.model, stages);
    case SplitMethod::Parameters: return parameters_split(resolved.model, stages);
    case SplitMethod::Best: break;
  }
  return best_partition(resolved, cost).ranges;
}

void for_each_candidate(const Scenario& base, const SearchSpace& space, const std::function<void(const Candidate&)>& visit) {
  const int n = space.gpus;
  if (n < 1) throw_bad_input("--gpus: must be at least 1, got {}", n);
  base.cluster.check_capacity(n);
  const int G = base.global_batch_size;
  if (G < 1) throw_bad_input("--global-batch-size: must be at least 1, got {}", G);
  const Model& model = base.model;
  const int layers = model.num_layers();

  // tp: powers of two inside a node that shard the model and divide the GPUs.
  const int node = base.cluster.ideal ? n : base.cluster.gpus_per_node;
  const int max_tp = space.max_tp > 0 ? std::min(space.max_tp, node) : node;
  std::vector<int> tps;
  if (space.tp) {
    const int t = *space.tp;
    if (t < 1) throw_bad_input("--tp: must be at least 1, got {}", t);
    if (!base.cluster.ideal && t > node)
      throw_bad_input("--tp: {} exceeds the {} GPUs of a node in cluster '{}'; tensor parallelism stays inside a node",
                      t, node, base.cluster.name);
    if (!tp_shards_model(model, t))
      throw_bad_input("--tp: {} cannot shard model '{}' (attention heads, key/value heads or explicit costs); use --tp 1 "
                      "or a divisor of the head count",
                      t, model.name);
    if (n % t != 0 && !space.up_to_gpus) throw_bad_input("--gpus: {} is not a multiple of --tp {}", n, t);
    tps.push_back(t);
  } else {
    for (int t = 1; t <= max_tp; t *= 2)
      if ((n % t == 0 || space.up_to_gpus) && (base.cluster.ideal || node % t == 0) && tp_shards_model(model, t))
        tps.push_back(t);
    if (tps.empty()) throw_bad_input("--max-tp: no tensor-parallel degree up to {} shards model '{}' and divides {} GPUs",
                                     max_tp, model.name, n);
  }

  const std::vector<std::string> schedules = space.schedules.empty() ? one_copy_schedule_names() : space.schedules;
  for (const std::string& s : schedules) chunks_per_rank(s, 1);  // BadInput naming --schedule for unknown names
  std::vector<Recompute> recomputes = space.recomputes;
  // Explicit layer costs are used as given, recomputation included or not: one mode is enough.
  if (recomputes.empty())
    recomputes = model.transformer ? std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full,
                                                            Recompute::PerStage}
                                   : std::vector<Recompute>{Recompute::None};
  // With fused attention, selective recomputation of the attention core alone has nothing to rebuild: the
  // same plan as none, which would fill --top with twins. Asked for by name, or with other modules, it stays.
  if (space.recomputes.empty() && base.workload.flash_attention && base.workload.recompute_modules.is_default())
    std::erase(recomputes, Recompute::Selective);

  const std::vector<RankOrder> orders = space.order ? std::vector<RankOrder>{*space.order} : rank_orders();
  const std::vector<Precision> precisions =
      space.precisions.empty() ? std::vector<Precision>{base.workload.precision} : space.precisions;
  const int zero = zero_levels_of(base, space).front();
  const std::vector<int> cps = cp_options(base, space);

  long visited = 0;
  const long blocks = model.num_blocks();
  bool any_pp = false, any_shallow = false, any_dp_match = false, any_dp = false, any_ep = false, any_mbs = false, any_vpp = false;
  std::set<int> dps_reached;  // the data-parallel degrees the GPUs allow, for a global batch none divides
  for (int tp : tps)
    for (int cp : cps) {
      if (!space.up_to_gpus && (n / tp) % cp != 0) continue;
      for (const auto& [pp, dp] : pipeline_shapes(n / (tp * cp), G, layers, space)) {
        if (space.pp && pp != *space.pp) continue;
        if (pp > layers) continue;
        any_pp = true;
        if (space.max_pp > 0 && pp > space.max_pp) continue;
        if (space.min_blocks_per_rank > 0 && pp > 1 && blocks < static_cast<long>(pp) * space.min_blocks_per_rank) continue;
        any_shallow = true;
        if (dp < 1 || (space.dp && dp != *space.dp)) continue;
        any_dp_match = true;
        dps_reached.insert(dp);
        if (G % dp != 0) continue;
        any_dp = true;
        const std::vector<std::pair<int, int>> experts = expert_options(model, space, tp, cp, dp);
        if (experts.empty()) continue;
        any_ep = true;
        for (int mbs : divisors(G / dp)) {
          if (space.micro_batch_size && mbs != *space.micro_batch_size) continue;
          if (!space.micro_batch_sizes.empty() &&
              std::find(space.micro_batch_sizes.begin(), space.micro_batch_sizes.end(), mbs) == space.micro_batch_sizes.end())
            continue;
          // Explicit layer costs are per micro-batch as given, whatever its size: a larger one would look free.
          if (!model.transformer && !space.micro_batch_size && mbs != 1) continue;
          any_mbs = true;
          const int m = G / (dp * mbs);
          for (const std::string& schedule : schedules)
            for (int vpp : vpp_options(schedule, pp, layers, space.vpp)) {
              any_vpp = true;
              for (Recompute rc : recomputes) {
                // Per-stage levels need each rank's memory to be one stage's (one chunk per rank).
                if (rc == Recompute::PerStage && chunks_per_rank(schedule, vpp) > 1) continue;
                for (RankOrder order : orders)
                  // Without pp or dp (or on the ideal cluster) the two orders place the same.
                  if (space.order || order == RankOrder::TpPpDp || (pp > 1 && dp > 1 && !base.cluster.ideal))
                    for (Precision precision : precisions)
                      for (const auto& [ep, etp] : experts)
                        // Its composites only hide all-to-alls: without them it is interleaved, slower.
                        if (ep > 1 || schedule != "interleaved-overlap") {
                          visit(Candidate{tp, pp, dp, vpp, mbs, m, schedule, rc, order, cp, precision, zero, ep, etp});
                          ++visited;
                        }
              }
            }
        }
      }
    }
  if (visited == 0) {
    if (!any_pp)
      throw_bad_input("--pp: no pipeline degree dividing {} GPUs / (tp x cp) (tp in {{{}}}, cp in {{{}}}) is at most the "
                      "{} layers of '{}'{}",
                      n, join_ints(tps), join_ints(cps), layers, model.name,
                      space.pp ? fmt::format(" and equal to {}", *space.pp) : "");
    if (!any_shallow) {
      std::vector<std::string> names, limits;
      if (space.max_pp > 0) {
        names.push_back("--max-pp");
        limits.push_back(fmt::format("is at most {}", space.max_pp));
      }
      if (space.min_blocks_per_rank > 0) {
        names.push_back("--min-layers-per-stage");
        limits.push_back(fmt::format("leaves each rank {} or more of the {} transformer blocks of '{}'",
                                     space.min_blocks_per_rank, blocks, model.name));
      }
      throw_bad_input("{}: no pipeline degree dividing {} GPUs / (tp x cp){} {}; relax {}", fmt::join(names, ", "), n,
                      space.pp ? fmt::format(" and equal to {}", *space.pp) : "", fmt::join(limits, " and "),
                      names.size() > 1 ? "them" : "it");
    }
    if (!any_dp_match)
      throw_bad_input("--dp: tp x cp x pp x {} is never {} GPUs with tp in {{{}}}, cp in {{{}}} and pp at most the {} "
                      "layers of '{}'",
                      *space.dp, n, join_ints(tps), join_ints(cps), layers, model.name);
    if (!any_dp) {
      if (space.dp)
        throw_bad_input("--global-batch-size: {} is not a multiple of --dp {}; use {} or {}", G, *space.dp,
                        std::max(*space.dp, G / *space.dp * *space.dp), (G / *space.dp + 1) * std::int64_t{*space.dp});
      throw_bad_input("--global-batch-size: {} is not a multiple of any data-parallel degree {} GPUs allow ({}); use {}", G,
                      n, fmt::join(dps_reached, ", "), nearest_batches_text(G, dps_reached));
    }
    if (!any_ep) {
      const MoeConfig& moe = *model.transformer->moe;
      throw_bad_input("--ep: no expert-parallel degree{} divides both the {} routed experts of '{}' and the tp x cp x dp "
                      "GPUs of a stage with etp {}; give an --ep dividing {} and those GPUs",
                      space.ep ? fmt::format(" equal to {}", *space.ep) : "", moe.experts, model.name,
                      space.etp.value_or(1), moe.experts);
    }
    if (!any_mbs && !space.micro_batch_sizes.empty() && !space.micro_batch_size)
      throw_bad_input("--profile: it measured micro-batch sizes {} and none of them x dp divides the global batch {}; "
                      "profile a divisor of {} (pipewright profile --micro-batch-size) or give --micro-batch-size",
                      join_ints(space.micro_batch_sizes), G, G);
    if (!any_mbs)
      throw_bad_input("--micro-batch-size: {} x dp does not divide the global batch {} for any dp; use a divisor of {}",
                      space.micro_batch_size.value_or(0), G, G);
    if (!any_vpp) {
      if (space.vpp)
        throw_bad_input("--vpp: {} fits none of the schedules ({}) with the model's {} layers; use --vpp 1 or a looped "
                        "schedule with pp >= 2 and pp x vpp <= {}",
                        *space.vpp, fmt::join(schedules, ", "), layers, layers);
      throw_bad_input("--schedules: {} run several model chunks per rank, which needs pp >= 2 and pp x 2 <= {} layers; "
                      "add a schedule such as 1f1b or allow more pipeline ranks",
                      fmt::join(schedules, ", "), layers);
    }
    throw_bad_input("the search space is empty; relax --tp, --pp, --dp, --vpp, --micro-batch-size or --schedules");
  }
}

std::vector<Candidate> enumerate_candidates(const Scenario& base, const SearchSpace& space) {
  std::vector<Candidate> out;
  for_each_candidate(base, space, [&](const Candidate& c) { out.push_back(c); });
  std::sort(out.begin(), out.end(), config_less);
  return out;
}

namespace {

// A generated schedule and what its order means for memory, shared by every candidate with the same
// (schedule, pp, chunks, micro-batches, group size, pending limit): tp, micro-batch size and recompute do
// not change the order.
struct CachedSchedule {
  std::shared_ptr<const Schedule> schedule;  // null when the cache was full (regenerate on demand)
  ScheduleSummary summary;
  // activation_holdings(*schedule), made once on first use (many schedules end at the memory bound).
  const std::vector<std::vector<Holding>>* holdings() const {
    if (!schedule) return nullptr;
    std::call_once(holdings_once, [&] { holdings_ = activation_holdings(*schedule); });
    return &holdings_;
  }
  mutable std::once_flag holdings_once;
  mutable std::vector<std::vector<Holding>> holdings_;
  std::string error;  // the generator's BadInput message; the rest is empty then
};

// Schedules are generated once per key and kept while they fit a budget of actions; some generators
// (the controllable-memory V schedules) take far longer than the simulation of their result.
class ScheduleCache {
 public:
  std::shared_ptr<const CachedSchedule> get(const ScheduleSpec& spec) {
    const Key key{spec.name, spec.ranks, spec.chunks, spec.microbatches, spec.group_size, spec.max_pending};
    std::shared_future<std::shared_ptr<const CachedSchedule>> future;
    std::promise<std::shared_ptr<const CachedSchedule>> promise;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(key);
      if (it == entries_.end()) {
        future = promise.get_future().share();
        entries_.emplace(key, future);
        mine = true;
      } else {
        future = it->second;
      }
    }
    if (mine) {
      auto entry = std::make_shared<CachedSchedule>();
      try {
        Schedule s = make_schedule(spec);
        entry->summary = summarize(s);
        long actions = 0;
        for (const auto& list : s.ranks) actions += static_cast<long>(list.size());
        std::lock_guard<std::mutex> lock(mutex_);
        if (actions_ + actions <= kMaxActions) {
          actions_ += actions;
          entry->schedule = std::make_shared<const Schedule>(std::move(s));
        }
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::BadInput) {
          promise.set_exception(std::current_exception());
          throw;
        }
        entry->error = e.what();
      }
      promise.set_value(entry);
    }
    return future.get();
  }

 private:
  using Key = std::tuple<std::string, int, int, int, int, int>;
  static constexpr long kMaxActions = 20'000'000;  // about 400 MB of actions
  std::mutex mutex_;
  std::map<Key, std::shared_future<std::shared_ptr<const CachedSchedule>>> entries_;
  long actions_ = 0;
};

// Whether a schedule family emits F&B composites: its smallest instances are looked at (a family none
// of whose small instances can be built counts as one that does, which only costs pruning).
bool uses_composites(const std::string& name) {
  for (int m : {4, 8, 16}) {
    ScheduleSpec spec;
    spec.name = name;
    spec.ranks = 2;
    spec.microbatches = m;
    spec.chunks = chunks_per_rank(name, 2);
    try {
      return has_composites(make_schedule(spec));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
    }
  }
  return true;
}


// Everything one search shares between its threads.
class Searcher {
 public:
  Searcher(const Scenario& base, const SearchSpace& space, const CostModel& cost, const SearchOptions& options)
      : base_(base), space_(space), cost_(cost), options_(options), top_(options.top, options.prefer_within) {}

  SearchResult run() {
    start_ = std::chrono::steady_clock::now();
    // In the generator's order, not config order: every order the search takes from candidates_ is total (the
    // queue's by bound then config, the failure's by memory then config), and sorting 0.6 million candidates
    // was a tenth of DeepSeek-V3's search on one thread.
    for_each_candidate(base_, space_, [&](const Candidate& c) { candidates_.push_back(c); });
    stats_.candidates = static_cast<long>(candidates_.size());
    prepare();
    work();
    if (top_.empty()) explain_failure();
    refine();
    SearchResult result;
    result.plans = top_.take(&result.fastest);
    stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    result.stats = stats_;
    return result;
  }

 private:
  struct Entry {
    size_t index = 0;      // into candidates_
    double time_lb = 0;    // seconds
    double memory_lb = 0;  // bytes
  };
  // A candidate up to its split: resolved scenario, schedule (shared) and memory bound over all splits.
  struct Prepared {
    Scenario scenario;
    std::shared_ptr<const CachedSchedule> cached;
    double memory_lb = 0;
    double limit = 0;  // the loosest memory limit of the GPUs the candidate uses
  };

  static constexpr long kScreenNodes = 100;
  static constexpr long kRefineNodes = 5000;
  static constexpr int kRefineTies = 16;
  static constexpr int kRefineJudged = 64;  // splits the search by simulated step time judges per plan

  using TableKey = LayerTableKey;
  static TableKey table_key(const Candidate& c) { return layer_table_key(c); }

  // At the candidate's ZeRO level, or with `loosest` at the highest it may take (what a bound that
  // drops it before its level is known must assume).
  double state_per_parameter(const Candidate& c, bool loosest = false) const {
    ParallelConfig pc = base_.parallel;
    pc.dp = c.dp;
    pc.pp = c.pp;
    pc.cp = c.cp;
    pc.tp = c.tp;
    pc.ep = c.ep;
    pc.etp = c.etp;
    pc.zero = loosest ? zero_levels_.back() : c.zero;
    const bool fp8 = c.precision == Precision::Fp8;
    const double dense = state_bytes_per_parameter(cost_, pc, fp8);
    // Routed experts keep their state over the expert-data-parallel group: the bounds, which charge one
    // figure per parameter, take the smaller of the two.
    if (!base_.model.transformer || !base_.model.transformer->moe) return dense;
    return std::min(dense, state_bytes_per_parameter(cost_, expert_sharding(pc), fp8));
  }

  // The workload every candidate of c's table key resolves to; where none resolves (they are all invalid, and
  // the table only orders them), c's unresolved.
  Workload table_workload(const Candidate& c) const {
    if (auto it = workloads_.find(table_key(c)); it != workloads_.end()) return it->second;
    return candidate_scenario(base_, c).workload;
  }

  // c's table key's whole table: work and times per layer.
  LayerTable whole_table(const Candidate& c) const {
    const Workload w = table_workload(c);
    return make_layer_table(base_.model, w, c.tp, base_.cluster, cost_, tp_groups_.at(c.tp),
                            least_all_to_all_links(base_.cluster, c.ep, w.dispatcher == Workload::Dispatcher::Flex));
  }

  // A per-stage recompute candidate's whole table, from its none and full siblings' where those are whole.
  LayerTable per_stage_whole_table(const Candidate& c) const {
    Candidate none = c, full = c;
    none.recompute = Recompute::None;
    full.recompute = Recompute::Full;
    const auto n = tables_.find(table_key(none)), f = tables_.find(table_key(full));
    if (n == tables_.end() || f == tables_.end() || n->second.work.empty() || f->second.work.empty()) return whole_table(c);
    return per_stage_table(n->second, f->second);
  }

  void prepare() {
    const int n = space_.gpus;
    zero_levels_ = zero_levels_of(base_, space_);
    for (size_t i = 0; i < candidates_.size(); ++i)
      if (candidates_[i].recompute != Recompute::PerStage) uniform_searched_.insert(candidates_[i].recompute);
    // The step-time bounds are about one synchronous iteration; with the optimizer's post-validation the
    // simulator reports a steady state of overlapping iterations, so only memory prunes then.
    prune_time_ = options_.prune && base_.synchronous_optimizer;
    reserve_ = base_.cluster.ideal ? 0.0 : cost_.memory_reserve_bytes();
    same_memory_everywhere_ = true;
    for (int g = 1; g < n; ++g)
      same_memory_everywhere_ = same_memory_everywhere_ && base_.cluster.memory_limit_at(g) == base_.cluster.memory_limit_at(0);
    // One table per key (tp, cp, micro-batch size, recompute, precision, ep, etp), each with its first candidate.
    // The workload of a key is the one resolve() makes for any candidate with it (the sequence length
    // defaulted, no sequence parallelism at tp 1, ...): the bounds must use the layer work evaluate() will use.
    std::vector<std::pair<TableKey, const Candidate*>> keys;
    std::map<TableKey, size_t> key_index;  // into keys
    std::vector<char> resolved;  // per key: whether workloads_ holds its workload (one map lookup per candidate)
    std::vector<size_t> key_of(candidates_.size());  // into keys
    std::optional<TableKey> last;  // the generator gives runs of one key: one map lookup a run
    size_t last_index = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const Candidate& c = candidates_[i];
      const TableKey key = table_key(c);
      if (key != last) {
        const auto [it, fresh] = key_index.try_emplace(key, keys.size());
        if (fresh) {
          keys.emplace_back(key, &c);
          resolved.push_back(0);
        }
        last = key;
        last_index = it->second;
      }
      key_of[i] = last_index;
      if (resolved[last_index]) continue;
      try {
        workloads_.emplace(key, resolve(candidate_scenario(base_, c)).workload);
        resolved[last_index] = 1;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::BadInput) throw;
      }
    }
    // Per tp, the tp groups of distinct (GPU, link) classes: all that a table reads of the groups.
    for (const auto& [key, c] : keys)
      if (!tp_groups_.count(c->tp)) {
        std::vector<int> groups;
        for (int g = 0; g < n; g += c->tp) groups.push_back(g);
        tp_groups_[c->tp] = distinct_tp_groups(base_.cluster, c->tp, groups);
      }
    // Every key's totals, all the first memory bound reads, on the search's threads; the whole tables (work and
    // times per layer) below, for the keys of the candidates that bound keeps (DeepSeek-V3 on 2,048 GPUs: 2,167 of
    // 3,312).
    std::vector<LayerTable*> table_at;  // per key
    for (const auto& [key, c] : keys) table_at.push_back(&tables_[key]);
    parallel_for(options_.threads, keys.size(), [&](size_t k) {
      *table_at[k] = make_layer_totals(base_.model, table_workload(*keys[k].second));
    });
    // The loosest memory limit of any GPU in use: what a bound over all ranks is held against.
    loosest_ = 0;
    const int per_node = base_.cluster.gpus_per_node > 0 ? base_.cluster.gpus_per_node : n;
    for (int g = 0; g < n; g += per_node) loosest_ = std::max(loosest_, base_.cluster.memory_limit_at(g));
    if (base_.cluster.ideal) loosest_ = kInf;

    // The memory bound first: the tables and step bounds below are for the candidates it keeps (DeepSeek-V3 on
    // 2,048 GPUs: it drops 7 of 10, and their step bounds were a third of the search). On the search's threads,
    // in blocks.
    constexpr size_t kBlock = 4096;
    std::vector<double> memory_lb(candidates_.size());
    parallel_for(options_.threads, (candidates_.size() + kBlock - 1) / kBlock, [&](size_t b) {
      for (size_t i = b * kBlock; i < std::min(candidates_.size(), (b + 1) * kBlock); ++i) {
        const Candidate& c = candidates_[i];
        memory_lb[i] = memory_bound(*table_at[key_of[i]], c.pp, state_per_parameter(c, true), reserve_);
      }
    });
    std::vector<char> kept(keys.size(), 0);
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const Candidate& c = candidates_[i];
      Entry e;
      e.index = i;
      e.memory_lb = memory_lb[i];
      if (options_.prune && !fits(e.memory_lb, loosest_)) {
        ++stats_.memory_pruned;
        memory_dropped_.push_back(e);
        continue;
      }
      queue_.push_back(e);
      if (kept[key_of[i]]) continue;
      kept[key_of[i]] = 1;
      if (c.recompute == Recompute::PerStage)  // its partitioner reads the uniform levels' tables (level_tables)
        for (Recompute level : {Recompute::None, Recompute::Selective, Recompute::Full}) {
          Candidate uniform = c;
          uniform.recompute = level;
          if (const auto it = key_index.find(table_key(uniform)); it != key_index.end()) kept[it->second] = 1;
        }
    }

    // The split-independent step bound charges an F&B composite its halves' sum, as the simulator does
    // unless the cost model gives the overlapped pair its own time; then schedules with composites go
    // without it (the bound after the split uses the composite's own time). A composite that only hides
    // all-to-alls costs at least both halves' compute: those schedules are bounded without the all-to-alls.
    std::vector<size_t> whole;  // into keys
    for (size_t k = 0; k < keys.size(); ++k)
      if (kept[k]) whole.push_back(k);
    // Per-stage recompute's tables last: from their none and full tables where those are built.
    const size_t uniform = static_cast<size_t>(
        std::stable_partition(whole.begin(), whole.end(),
                              [&](size_t k) { return keys[k].second->recompute != Recompute::PerStage; }) -
        whole.begin());
    std::vector<char> overlapped(keys.size(), 0), has_hidden(keys.size(), 0);
    std::vector<LayerTable> hidden(keys.size());  // per key with ep or etp: with_all_to_alls_hidden of its table
    auto make_whole = [&](size_t j) {
      const size_t k = whole[j];
      const Candidate& c = *keys[k].second;
      LayerTable& table = *table_at[k];
      table = j < uniform ? whole_table(c) : per_stage_whole_table(c);
      ParallelConfig pc;
      pc.tp = c.tp;
      pc.cp = c.cp;
      const std::vector<StageCost> all = stage_costs(base_.model, table.work, {LayerRange{0, base_.model.num_layers() - 1}},
                                                     pc, base_.cluster, cost_, {0});
      overlapped[k] = all.front().overlapped_fb_s > 0;
      if (c.ep > 1 || c.etp > 1) {
        hidden[k] = with_all_to_alls_hidden(table);
        has_hidden[k] = 1;
      }
    };
    parallel_for(options_.threads, uniform, make_whole);
    parallel_for(options_.threads, whole.size() - uniform, [&](size_t j) { make_whole(uniform + j); });
    // Per schedule name, once: whether it has composites (a map lookup for every candidate was a twentieth of
    // this set-up).
    std::map<std::string, bool> composites;
    for (size_t i = 0; i < candidates_.size(); ++i)
      if (i == 0 || candidates_[i].schedule != candidates_[i - 1].schedule)
        composites.try_emplace(candidates_[i].schedule, false);
    for (auto& [name, has] : composites) has = uses_composites(name);

    // Schedules, orders and precisions share a step bound: one per table and shape. None (0) for composites a
    // cost model may time below their halves.
    std::map<std::tuple<const LayerTable*, int, int, int, int>, double> step_bounds;
    std::vector<const double*> step_bound(candidates_.size(), nullptr);
    for (const Entry& e : queue_) {
      const Candidate& c = candidates_[e.index];
      const size_t k = key_of[e.index];
      const bool composite = composites.at(c.schedule);
      if (composite && overlapped[k]) continue;
      const LayerTable& bounded = composite && has_hidden[k] ? hidden[k] : *table_at[k];
      const auto shape =
          std::make_tuple(&bounded, c.pp, chunks_per_rank(c.schedule, c.vpp), c.microbatches, model_copies(c.schedule));
      step_bound[e.index] = &step_bounds.try_emplace(shape, 0.0).first->second;
    }
    // On the search's threads.
    std::vector<std::pair<const std::tuple<const LayerTable*, int, int, int, int>, double>*> shapes;
    for (auto& entry : step_bounds) shapes.push_back(&entry);
    parallel_for(options_.threads, shapes.size(), [&](size_t k) {
      const auto& [table, pp, chunks, m, copies] = shapes[k]->first;
      shapes[k]->second = step_time_bound(*table, pp, chunks, m, copies);
    });
    for (Entry& e : queue_) e.time_lb = step_bound[e.index] ? *step_bound[e.index] : 0.0;
    sort_queue();
  }

  // In bound order, rank-order twins (one memory_key) next to each other and in one group: a thread takes a
  // group at a time, so that the second twin finds what the first learned about memory (two threads taking
  // them at once would both run the partitioner to learn it).
  void sort_queue() {
    // memory_key()'s fields, in config_key()'s order, compared where they stand (no copies).
    auto but_order = [](const Candidate& c) {
      return std::tie(c.tp, c.cp, c.ep, c.etp, c.pp, c.dp, c.vpp, c.micro_batch_size, c.schedule, c.recompute,
                      c.precision, c.zero, c.microbatches);
    };
    parallel_sort(options_.threads, queue_.begin(), queue_.end(), [&](const Entry& a, const Entry& b) {
      if (a.time_lb != b.time_lb) return a.time_lb < b.time_lb;
      const Candidate &x = candidates_[a.index], &y = candidates_[b.index];
      if (but_order(x) != but_order(y)) return but_order(x) < but_order(y);
      return config_less(x, y);
    });
    groups_.clear();
    for (size_t i = 0; i < queue_.size(); ++i) {
      const bool twin = i > 0 && queue_[i].time_lb == queue_[i - 1].time_lb &&
                        but_order(candidates_[queue_[i].index]) == but_order(candidates_[queue_[i - 1].index]);
      if (!twin) groups_.push_back(i);
    }
    groups_.push_back(queue_.size());
  }

  static bool fits(double need, double limit) { return need <= limit * (1 + 1e-9); }

  // Resolves the candidate and finds its schedule and memory bound (BadInput: the candidate is invalid).
  Prepared prepare_candidate(const Candidate& c) {
    Prepared p;
    p.scenario = resolve(candidate_scenario(base_, c));
    // zb-auto's simulated order comes from the stage costs, not this name-only one: the bounds that read
    // the order skip it.
    p.cached = cache_.get(schedule_spec(p.scenario));
    if (!p.cached->error.empty()) throw Error(ErrorKind::BadInput, p.cached->error);
    const LayerTable& t = tables_.at(table_key(c));
    // The schedule's holdings bound splits of one copy over its stages; with copies the average over ranks.
    p.memory_lb = order_from_costs(c.schedule) || model_copies(c.schedule) > 1
                      ? memory_bound(t, c.pp, state_per_parameter(c), reserve_)
                      : memory_bound(t, p.cached->summary, state_per_parameter(c), reserve_);
    const ParallelConfig& pc = p.scenario.parallel;
    if (same_memory_everywhere_) p.limit = p.scenario.cluster.memory_limit_at(0);
    else
      for (int g = 0; g < pc.gpus(); g += pc.tp) p.limit = std::max(p.limit, p.scenario.cluster.memory_limit_at(g));
    return p;
  }

  // A per-stage recompute candidate's layer work at none, selective and full: the tables of the uniform
  // candidates with its other degrees (a table depends on nothing else); null where the space has none or it
  // holds only totals (the partitioner makes that level's).
  std::vector<const LayerWorks*> level_tables(const Candidate& c) const {
    std::vector<const LayerWorks*> out;
    for (Recompute level : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      Candidate uniform = c;
      uniform.recompute = level;
      const auto it = tables_.find(table_key(uniform));
      out.push_back(it == tables_.end() || it->second.work.empty() ? nullptr : &it->second.work);
    }
    return out;
  }

  std::shared_ptr<const Schedule> schedule_of(const Prepared& p) {
    if (p.cached->schedule) return p.cached->schedule;
    return std::make_shared<const Schedule>(make_schedule(schedule_spec(p.scenario)));
  }

  // The partitioner's split. `simulate` false: the first bottleneck-optimal split in its secondary order
  // (the search ranks candidates by it); true: the best of the tied splits by simulation (the reported
  // plans: the fastest of all splits, planner/fastest_split.hpp). BadInput from it means that no split fits
  // in memory. With several chunks per rank and memory binding, the partitioner's branch and bound gets a
  // node budget (deterministic: the same split whatever the threads do); the reported plans get a larger
  // one. Sets the scenario's ranges (and per-stage recompute levels).
  void best_split(Scenario& resolved, const Schedule& schedule, bool simulate,
                  const std::vector<std::vector<Holding>>* holdings = nullptr, const LayerWorks* work = nullptr,
                  std::vector<const LayerWorks*> level_work = {}) {
    PartitionOptions po;
    po.simulate = simulate;
    po.schedule = &schedule;
    po.holdings = holdings;
    po.work = work;
    po.level_work = std::move(level_work);
    if (simulate) po.fastest_judged = kRefineJudged;
    po.explain_no_fit = false;  // over memory is all the search needs to know
    po.search_nodes = simulate ? kRefineNodes : kScreenNodes;
    po.max_ties = simulate ? kRefineTies : 1;  // 1: the first tied split in the partitioner's secondary order
    if (!simulate && schedule.copies > 1) {
      // With copies of the model the part bottleneck the ties share says little of a rank pair's load (it runs
      // both its parts): the screen takes the split as the report will, by simulation.
      po.simulate = true;
      po.max_ties = kRefineTies;
      po.fastest_judged = kRefineJudged;
    }
    PartitionResult r = best_partition(resolved, cost_, po);
    resolved.ranges = std::move(r.ranges);
    resolved.stage_recompute = std::move(r.stage_recompute);
  }

  // One pass over the queue per ZeRO level: the first at the lowest level; each later one retries, in
  // bound order, the candidates the previous left over memory, under the threshold the passes before
  // set, so that most fall to their first-level bound before anything is built.
  void work() {
    const long total = static_cast<long>(queue_.size()) + stats_.memory_pruned;
    done_ = stats_.memory_pruned;
    first_queue_ = queue_;
    const int threads =
        std::max(1, std::min(thread_count(options_.threads), static_cast<int>(std::max<size_t>(queue_.size(), 1))));
    threads_ = threads;
    if (options_.time_limit_s > 0)
      checkpoint_actions_ = kSearchCheckFraction * options_.time_limit_s * threads / kSearchSecondsPerAction;
    auto worker = [&] {
      try {
        for (;;) {
          const size_t g = next_.fetch_add(1);
          if (g + 1 >= groups_.size() || stop_) break;
          // The group is finished even after another thread's bound stopped the queue: its entries' bounds
          // lie below the one that stopped it, and process() holds each against the threshold.
          for (size_t i = groups_[g]; i < groups_[g + 1] && !failed_; ++i) {
            process(queue_[i]);
            if (level_ == 0) report(1, total);
          }
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
        failed_ = true;
        stop_ = true;
      }
    };
    for (level_ = 0;; ++level_) {
      std::vector<std::thread> pool;
      for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
      worker();
      for (auto& t : pool) t.join();
      if (error_) std::rethrow_exception(error_);
      // Those the stop left in the queue were dropped by the bound.
      stats_.bound_pruned += static_cast<long>(queue_.size()) - attempted_.load();
      if (retry_.empty()) break;
      queue_ = std::move(retry_);
      retry_.clear();
      sort_queue();
      next_ = 0;
      stop_ = false;
      attempted_ = 0;
    }
    report(total - done_, total);
  }

  void report(long add, long total) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ += add;
    if (options_.progress) options_.progress(std::min(done_, total), total);
  }

  void count(long SearchStats::*field) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++(stats_.*field);
  }

  void process(const Entry& e) {
    Candidate c = candidates_[e.index];
    if (prune_time_ && exceeds(e.time_lb, threshold_.load())) {
      // The queue is sorted by this bound and the threshold only falls: nothing after this can enter.
      stop_ = true;
      return;
    }
    ++attempted_;
    const double actions = candidate_actions(c);
    const double considered = considered_actions_.fetch_add(actions) + actions;
    if (options_.time_limit_s > 0 && !time_checked_.load()) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      if ((considered >= checkpoint_actions_ || elapsed >= kSearchCheckFraction * options_.time_limit_s) &&
          !time_checked_.exchange(true))
        check_time(elapsed, considered);
    }
    // The lowest ZeRO level that fits: a higher one shards more state but only adds communication, so it
    // is tried only where the lower one runs out of memory, in the next pass.
    c.zero = zero_levels_[level_];
    const bool below_floor = c.cp > 1 && c.zero < space_.min_zero_with_cp;
    if (!below_floor && attempt(c) != Outcome::OverMemory) return;
    if (level_ + 1 < zero_levels_.size()) {
      std::lock_guard<std::mutex> lock(mutex_);
      retry_.push_back(e);
    } else if (below_floor) {
      note_invalid(c, fmt::format("the export target shards the model state over the {} cp ranks (ZeRO-{} or higher), "
                                  "not ZeRO-{}",
                                  c.cp, space_.min_zero_with_cp, c.zero));
    } else {
      count(&SearchStats::over_memory);
    }
  }

  enum class Outcome { Done, OverMemory };

  // One candidate at its ZeRO level: scored, or dropped (invalid, pruned, a twin), or over memory.
  Outcome attempt(const Candidate& c) {
    if (known_over_memory(c)) return Outcome::OverMemory;
    Prepared p;
    try {
      p = prepare_candidate(c);
    } catch (const Error& err) {
      if (err.kind() != ErrorKind::BadInput) throw;
      note_invalid(c, err.what());
      return Outcome::Done;
    }
    if (options_.prune && !fits(p.memory_lb, p.limit)) return over_memory(c);
    const std::shared_ptr<const Schedule> schedule = schedule_of(p);
    try {
      if (c.recompute == Recompute::PerStage)
        best_split(p.scenario, *schedule, false, p.cached->holdings(), nullptr, level_tables(c));
      else
        best_split(p.scenario, *schedule, false, p.cached->holdings(), &tables_.at(table_key(c)).work);
      // Every stage at one level: the uniform candidate of that level is the same plan.
      const std::vector<Recompute>& levels = p.scenario.stage_recompute;
      if (!levels.empty() && std::all_of(levels.begin(), levels.end(), [&](Recompute r) { return r == levels.front(); }) &&
          uniform_searched_.count(levels.front())) {
        count(&SearchStats::same_as_uniform);
        return Outcome::Done;
      }
    } catch (const Error& err) {
      if (err.kind() != ErrorKind::BadInput) throw;
      return over_memory(c);  // no split fits
    }
    if (prune_time_) {
      const ParallelConfig& pc = p.scenario.parallel;
      std::vector<int> stage_gpu, rank_gpu;
      for (int st = 0; st < schedule->num_stages(); ++st)
        stage_gpu.push_back(pipeline_rank_gpu(pc, schedule->placement.rank_of(st)));
      for (int r = 0; r < pc.pp; ++r) rank_gpu.push_back(pipeline_rank_gpu(pc, r));
      const Scenario& sc = p.scenario;
      std::vector<LayerRange> copied;  // each stage's layers where copies of the model run the split's parts
      const std::vector<StageCost> costs = stage_costs(sc.model,
                                                       c.recompute == Recompute::PerStage
                                                           ? staged_layer_work(sc.model, sc.workload, sc.ranges, sc.stage_recompute)
                                                           : tables_.at(table_key(c)).work,
                                                       schedule->copies == 1 ? sc.ranges : (copied = stage_ranges(*schedule, sc.ranges)),
                                                       pc, p.scenario.cluster, cost_, stage_gpu, schedule->copies);
      // A higher ZeRO level is no faster: pruned here, pruned there. Each rank's path first: it drops most of
      // them (the split the memory allows leaves one rank the slowest, the fill and drain around it) without
      // timing the schedule. An order made from the stage costs (zb-auto) is not the cached one, but every
      // order it picks from gives each rank the same actions; the timing bound reads the order itself.
      const bool fixed = !order_from_costs(c.schedule);
      const double threshold = threshold_.load();
      if (exceeds(rank_path_bound(*schedule, costs, fixed), threshold) ||
          (fixed && exceeds(step_time_bound(*schedule, costs, rank_gpu, p.scenario.cluster, cost_), threshold))) {
        count(&SearchStats::bound_pruned);
        return Outcome::Done;
      }
    }
    Evaluation ev;
    try {
      ev = evaluate(p.scenario, cost_, nullptr, schedule.get());
    } catch (const Error& err) {
      if (err.kind() != ErrorKind::BadInput) throw;
      note_invalid(c, err.what());
      return Outcome::Done;
    }
    count(&SearchStats::simulated);
    if (!ev.metrics.overflows.empty()) return Outcome::OverMemory;
    insert(Plan{c, std::move(ev), {}});
    return Outcome::Done;
  }

  // Whether no split fits does not depend on where the ranks sit when every GPU has the same memory: a
  // candidate found over memory (by the bound or by the partitioner, not by one split's simulation) answers
  // for its other rank order too.
  static Candidate memory_key(Candidate c) {
    c.order = RankOrder::TpPpDp;
    return c;
  }
  bool known_over_memory(const Candidate& c) {
    if (!same_memory_everywhere_) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    return over_memory_.count(memory_key(c)) > 0;
  }
  Outcome over_memory(const Candidate& c) {
    if (same_memory_everywhere_) {
      std::lock_guard<std::mutex> lock(mutex_);
      over_memory_.insert(memory_key(c));
    }
    return Outcome::OverMemory;
  }

  // Once: what was considered and what the bound leaves of the rest against the time limit.
  void check_time(double elapsed, double considered) {
    SearchProgress progress;
    progress.elapsed_s = elapsed;
    progress.considered = attempted_.load();
    progress.considered_actions = considered;
    progress.top = std::max(options_.top, 1);
    progress.threads = threads_;
    const double threshold = threshold_.load();
    progress.bounded = prune_time_ && threshold < kInf;
    for (size_t i = groups_[std::min(next_.load(), groups_.size() - 1)]; i < queue_.size(); ++i) {
      if (prune_time_ && exceeds(queue_[i].time_lb, threshold)) break;  // sorted by the bound
      ++progress.left;
      progress.left_actions += candidate_actions(candidates_[queue_[i].index]);
    }
    check_work("plan", {search_time_estimate(progress)},
               WorkLimits{std::numeric_limits<double>::infinity(), options_.time_limit_s});
  }

  void note_invalid(const Candidate& c, const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.invalid;
    if (!first_invalid_ || config_less(c, first_invalid_->first)) first_invalid_ = std::make_pair(c, why);
  }

  void insert(Plan plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    top_.add(std::move(plan));
    threshold_ = top_.threshold();
  }

  // The reported plans take the best of the partitioner's tied splits by simulation, which can only
  // shorten their step (the search's split is the first of them); take() ranks them again.
  void refine() {
    std::vector<Plan>& plans = top_.kept();
    parallel_for(options_.threads, plans.size(), [&](size_t i) { refine(plans[i]); });
  }

  void refine(Plan& plan) {
    Scenario resolved = plan.evaluation.scenario;
    const Schedule& schedule = plan.evaluation.schedule;
    try {
      best_split(resolved, schedule, true);
    } catch (const Error& err) {
      if (err.kind() != ErrorKind::BadInput) throw;
      return;  // the larger search found nothing better that fits: keep the screened split
    }
    const std::vector<LayerRange>& ranges = resolved.ranges;
    const std::vector<LayerRange>& before = plan.evaluation.scenario.ranges;
    bool same = ranges.size() == before.size() && resolved.stage_recompute == plan.evaluation.scenario.stage_recompute;
    for (size_t i = 0; same && i < ranges.size(); ++i)
      same = ranges[i].first == before[i].first && ranges[i].last == before[i].last;
    if (same) return;
    // The plan's schedule is the generator's own unless zb-auto ordered it by the costs (evaluate orders it again).
    Evaluation ev = evaluate(resolved, cost_, nullptr, order_from_costs(resolved.schedule) ? nullptr : &schedule);
    if (ev.metrics.overflows.empty() && ev.metrics.step_time_s < plan.evaluation.metrics.step_time_s)
      plan.evaluation = std::move(ev);
  }

  // No plan: say which constraint binds. Memory first (the common case): the candidate closest to
  // fitting, by the partitioner's smallest need over all splits, searched in order of the memory bound
  // and stopped once no bound can beat the closest.
  [[noreturn]] void explain_failure() {
    std::vector<Entry> all = memory_dropped_;
    all.insert(all.end(), first_queue_.begin(), first_queue_.end());
    std::sort(all.begin(), all.end(), [&](const Entry& a, const Entry& b) {
      if (a.memory_lb != b.memory_lb) return a.memory_lb < b.memory_lb;
      return config_less(candidates_[a.index], candidates_[b.index]);
    });
    struct Closest {
      Candidate config;
      Scenario scenario;
      MemoryNeed need;
    };
    std::optional<Closest> closest;
    auto excess = [](const MemoryNeed& n) { return n.need_bytes - n.limit_bytes; };
    for (const Entry& e : all) {
      if (closest && e.memory_lb - loosest_ > excess(closest->need)) break;
      const Candidate& c = candidates_[e.index];
      LayerTable& table = tables_.at(table_key(c));
      if (table.work.empty()) table = whole_table(c);  // a key the first memory bound dropped whole
      try {
        Prepared p = prepare_candidate(c);
        if (closest && p.memory_lb - p.limit > excess(closest->need)) continue;
        const std::shared_ptr<const Schedule> schedule = schedule_of(p);
        PartitionOptions po;
        po.schedule = schedule.get();
        po.holdings = p.cached->holdings();
        po.search_nodes = kRefineNodes;
        const MemoryNeed need = smallest_memory_need(p.scenario, cost_, po);
        if (!closest || excess(need) < excess(closest->need) ||
            (excess(need) == excess(closest->need) && config_less(c, closest->config)))
          closest = Closest{c, p.scenario, need};
      } catch (const Error& err) {
        if (err.kind() != ErrorKind::BadInput) throw;
      }
    }
    if (closest && excess(closest->need) > 0) {
      const MemoryNeed& n = closest->need;
      throw_bad_input("no configuration of {} GPUs fits in memory: the smallest stage needs {} with {}; a plan may use {}, "
                      "{} short; use more GPUs or GPUs with more memory{}",
                      space_.gpus, format_bytes(n.need_bytes), describe(closest->config),
                      base_.cluster.memory_limit_text(n.limit_bytes), format_bytes(n.need_bytes - n.limit_bytes),
                      base_.cluster.memory_headroom > 0 ? ", or a smaller --memory-headroom" : "");
    }
    if (first_invalid_)
      throw_bad_input("no configuration is valid; the first, {}, fails: {}", describe(first_invalid_->first),
                      first_invalid_->second);
    throw_bad_input("no configuration fits; relax --tp, --pp, --dp, --vpp, --micro-batch-size or --schedules");
  }

  const Scenario& base_;
  const SearchSpace& space_;
  const CostModel& cost_;
  const SearchOptions& options_;

  BlockList<Candidate> candidates_;
  // Per key: its totals, and after prepare() its whole table where a candidate of it passed the first memory bound
  // (explain_failure() makes the others' when it needs them).
  std::map<TableKey, LayerTable> tables_;
  std::map<TableKey, Workload> workloads_;
  std::map<int, std::vector<int>> tp_groups_;  // per tp: distinct_tp_groups of all its groups
  std::vector<int> zero_levels_;
  std::set<Recompute> uniform_searched_;  // the uniform recompute modes among the candidates
  ScheduleCache cache_;
  double reserve_ = 0;
  double loosest_ = 0;
  bool prune_time_ = true;
  std::vector<Entry> queue_;        // this pass's
  std::vector<Entry> first_queue_;  // the first pass's: every candidate the first bound kept
  std::vector<Entry> retry_;        // over memory at this pass's level, for the next
  std::vector<size_t> groups_;      // where each group of queue_ starts, then queue_.size()
  size_t level_ = 0;                // into zero_levels_
  std::vector<Entry> memory_dropped_;
  bool same_memory_everywhere_ = false;
  struct ConfigLess {
    bool operator()(const Candidate& a, const Candidate& b) const { return config_less(a, b); }
  };
  std::set<Candidate, ConfigLess> over_memory_;  // memory_key()s, under mutex_

  std::mutex mutex_;
  std::atomic<size_t> next_{0};  // the next group
  std::atomic<bool> stop_{false};    // no more groups to take: the bound passed the threshold
  std::atomic<bool> failed_{false};  // a thread threw: everyone stops at once
  std::atomic<long> attempted_{0};
  std::atomic<double> considered_actions_{0};
  std::atomic<bool> time_checked_{false};
  double checkpoint_actions_ = 0;
  std::chrono::steady_clock::time_point start_;
  int threads_ = 1;
  std::atomic<double> threshold_{kInf};
  long done_ = 0;
  TopPlans top_;
  SearchStats stats_;
  std::optional<std::pair<Candidate, std::string>> first_invalid_;
  std::exception_ptr error_;
};

}  // namespace

SearchResult search_plans(const Scenario& base, const SearchSpace& space, const CostModel& cost,
                          const SearchOptions& options) {
  Searcher s(base, space, cost, options);
  return s.run();
}

std::vector<SplitComparison> compare_splits(const std::vector<Plan>& plans, const CostModel& cost, int threads) {
  std::vector<SplitComparison> out(plans.size());
  // Two simulations per plan: its configuration split evenly, and by parameters.
  parallel_for(threads, 2 * plans.size(), [&](size_t i) {
    const Plan& p = plans[i / 2];
    const SplitMethod method = i % 2 == 0 ? SplitMethod::Uniform : SplitMethod::Parameters;
    Scenario s = p.evaluation.scenario;
    s.ranges = split_for(s, cost, method);
    // Per-stage recompute: the baseline split's stages take the levels they need, as the plan's do.
    if (!s.stage_recompute.empty()) s.stage_recompute = stage_recompute_for(s, cost, s.ranges);
    Evaluation ev = evaluate(s, cost);
    (i % 2 == 0 ? out[i / 2].uniform : out[i / 2].parameters) = std::move(ev);
  });
  return out;
}

}  // namespace pw
