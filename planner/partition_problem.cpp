#include "planner/partition_problem.hpp"

#include <algorithm>
#include <optional>
#include <tuple>

#include "core/error.hpp"
#include "core/layer_work.hpp"
#include "core/special_values.hpp"
#include "planner/layer_graph.hpp"

namespace pw {
namespace {

// h covers g when it holds at least as much for every choice of sizes with A_c >= WG_c >= 0: at least
// as many full sets in every chunk, and at least as many sets of either kind.
bool covers(const Holding& h, const Holding& g) {
  for (size_t c = 0; c < h.full.size(); ++c)
    if (h.full[c] < g.full[c] || h.full[c] + h.partial[c] < g.full[c] + g.partial[c]) return false;
  return true;
}

template <typename T, typename Covers>
std::vector<T> pareto(std::vector<T> items, Covers&& cover) {
  std::vector<T> kept;
  for (size_t i = 0; i < items.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < items.size() && !dominated; ++j) {
      if (i == j || !cover(items[j], items[i])) continue;
      // Of two equal holdings, keep the first.
      dominated = !cover(items[i], items[j]) || j < i;
    }
    if (!dominated) kept.push_back(items[i]);
  }
  return kept;
}

bool same_link(const LinkSpec& a, const LinkSpec& b) {
  return a.bandwidth_bytes_per_s == b.bandwidth_bytes_per_s && a.latency_s == b.latency_s;
}

bool same_gpu(const GpuSpec& a, const GpuSpec& b) {
  return a.name == b.name && a.peak_flops == b.peak_flops && a.memory_bytes == b.memory_bytes &&
         a.hbm_bytes_per_s == b.hbm_bytes_per_s;
}

}  // namespace

std::vector<std::vector<Holding>> activation_holdings(const Schedule& schedule) {
  const int ranks = schedule.num_ranks();
  std::vector<std::vector<int>> rank_stages(static_cast<size_t>(ranks));
  for (int s = 0; s < schedule.num_stages(); ++s) rank_stages[schedule.placement.rank_of(s)].push_back(s);
  std::vector<std::vector<Holding>> out(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const std::vector<int>& mine = rank_stages[static_cast<size_t>(r)];
    auto chunk = [&](int stage) {
      return static_cast<int>(std::lower_bound(mine.begin(), mine.end(), stage) - mine.begin());
    };
    // The holding now, as chunk counts full then partial; the points recorded, one after another in `flat`
    // (a schedule records thousands: one allocation for all of them).
    const size_t chunks = mine.size(), width = 2 * chunks;
    std::vector<int> now(width, 0), flat;
    auto backward = [&](Op op, int stage) {
      const auto c = static_cast<size_t>(chunk(stage));
      if (op == Op::B) {
        --now[c];
        ++now[chunks + c];
      } else if (op == Op::W) {
        --now[chunks + c];
      } else {  // BW
        --now[c];
      }
    };
    // Only the allocation points a backward follows: one that another F follows is covered by the next.
    auto record = [&] {
      const bool repeat = !flat.empty() && std::equal(now.begin(), now.end(), flat.end() - static_cast<std::ptrdiff_t>(width));
      if (!repeat) flat.insert(flat.end(), now.begin(), now.end());
    };
    bool pending = false;
    for (const Action& a : schedule.ranks[static_cast<size_t>(r)]) {
      if (!is_compute(a.op)) continue;
      if (a.op == Op::F || a.op == Op::FB) {
        ++now[static_cast<size_t>(chunk(a.stage))];
        pending = a.op == Op::F;
        if (a.op == Op::FB) {
          record();
          backward(Op::BW, a.stage2);
        }
      } else {
        if (pending) record();
        pending = false;
        backward(a.op, a.stage);
      }
    }
    if (pending) record();
    // Steady states repeat one holding many times: keep each once, in order of first appearance.
    const size_t count = width > 0 ? flat.size() / width : 0;
    const auto point = [&](size_t i) { return flat.begin() + static_cast<std::ptrdiff_t>(i * width); };
    const auto less = [&](size_t a, size_t b) {
      return std::lexicographical_compare(point(a), point(a) + static_cast<std::ptrdiff_t>(width), point(b),
                                          point(b) + static_cast<std::ptrdiff_t>(width));
    };
    std::vector<size_t> order(count);
    for (size_t i = 0; i < count; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), less);
    std::vector<size_t> firsts;
    for (size_t k = 0; k < order.size(); ++k)
      if (k == 0 || less(order[k - 1], order[k])) firsts.push_back(order[k]);
    std::sort(firsts.begin(), firsts.end());
    std::vector<Holding> distinct;
    for (size_t i : firsts)
      distinct.push_back(Holding{std::vector<int>(point(i), point(i) + static_cast<std::ptrdiff_t>(chunks)),
                                 std::vector<int>(point(i) + static_cast<std::ptrdiff_t>(chunks), point(i) + static_cast<std::ptrdiff_t>(width))});
    out[static_cast<size_t>(r)] = pareto(std::move(distinct), covers);
  }
  return out;
}

namespace {

// A caller's table shared without ownership (the aliasing constructor with no owner): the problem reads it in
// place and the caller keeps it alive.
template <class T>
std::shared_ptr<const T> borrowed(const T* table) {
  return std::shared_ptr<const T>(std::shared_ptr<const T>(), table);
}

}  // namespace

PartitionProblem make_partition_problem(const Scenario& s, const CostModel& cost, const Schedule& schedule,
                                        const ProblemOptions& options) {
  PartitionProblem P;
  const ParallelConfig& pc = s.parallel;
  const Cluster& cluster = s.cluster;
  P.layers = s.model.num_layers();
  P.copies = schedule.copies;
  if (schedule.num_ranks() != pc.pp) throw_runtime("partitioner: schedule has {} ranks, pp is {}", schedule.num_ranks(), pc.pp);
  if (P.copies != 1 && (P.copies != 2 || pc.pp % 2 != 0))
    throw_runtime("partitioner: {} copies of the model on {} ranks; it splits one copy, or two on rank pairs", P.copies, pc.pp);
  P.stages = schedule.stages_per_copy();
  P.ranks = P.copies == 1 ? pc.pp : pc.pp / 2;
  if (P.stages > P.layers)
    throw_bad_input("--pp x --vpp = {} stages but model '{}' has only {} layers; use fewer stages", P.stages,
                    s.model.name, P.layers);
  const size_t n = static_cast<size_t>(P.layers);

  P.stage_rank.resize(static_cast<size_t>(P.stages));
  P.stage_chunk.resize(static_cast<size_t>(P.stages));
  std::vector<int> seen(static_cast<size_t>(P.ranks), 0);
  for (int st = 0; st < P.stages; ++st) {
    // Copy 0's stage st runs on rank st: a pair's parts are v and P - 1 - v, in that order.
    const int r = P.copies == 1 ? schedule.placement.rank_of(st) : std::min(st, P.stages - 1 - st);
    P.stage_rank[static_cast<size_t>(st)] = r;
    P.stage_chunk[static_cast<size_t>(st)] = seen[static_cast<size_t>(r)]++;
    P.max_chunks = std::max(P.max_chunks, seen[static_cast<size_t>(r)]);
  }
  for (int r = 0; r < P.ranks; ++r) P.rank_gpu.push_back(pipeline_rank_gpu(pc, r));

  if (s.workload.recompute == Recompute::PerStage) {
    if (!s.model.transformer)
      throw_bad_input("--recompute per-stage: model '{}' gives explicit per-layer costs; use --recompute none", s.model.name);
    if (P.max_chunks > 1)
      throw_bad_input("--recompute per-stage: schedule '{}' puts {} chunks on a rank, whose memory the chunks share; "
                      "use a schedule with one chunk per rank or one recompute level",
                      s.schedule, P.max_chunks);
    P.levels = {Recompute::None, Recompute::Selective, Recompute::Full};
  } else {
    P.levels = {s.workload.recompute};
  }
  for (size_t l = 0; l < P.levels.size(); ++l) {
    const Recompute level = P.levels[l];
    const LayerWorks* given = P.levels.size() == 1                             ? options.work
                              : options.level_work.size() == P.levels.size() ? options.level_work[l]
                                                                             : nullptr;
    if (given) {
      if (given->size() != n) throw_runtime("partitioner: {} layer works for {} layers", given->size(), n);
      P.level_work.push_back(borrowed(given));
      continue;
    }
    Workload w = s.workload;
    w.recompute = level;
    LayerWorks work;
    work.reserve(n);
    append_layer_works(s.model, 0, s.model.num_layers() - 1, w, work);
    P.level_work.push_back(std::make_shared<const LayerWorks>(std::move(work)));
  }

  // Layer times per GPU type and tp link: one prefix-sum row per distinct pair among the ranks.
  struct Class {
    const GpuSpec* gpu;
    GroupLinks links;
  };
  std::vector<Class> classes;
  std::vector<int> rank_class(static_cast<size_t>(P.ranks));
  for (int r = 0; r < P.ranks; ++r) {
    const int g = P.rank_gpu[static_cast<size_t>(r)];
    const Class c{&cluster.gpu_at(g), group_links(cluster, pc, g)};
    size_t k = 0;
    while (k < classes.size() && !(same_gpu(*classes[k].gpu, *c.gpu) && same_link(classes[k].links.tp, c.links.tp) &&
                                   same_link(classes[k].links.cp, c.links.cp)))
      ++k;
    if (k == classes.size()) classes.push_back(c);
    rank_class[static_cast<size_t>(r)] = static_cast<int>(k);
  }
  for (const auto& level_work : P.level_work) {
    const LayerWorks& work = *level_work;
    // The lightest level (the first) also keeps each phase apart when asked (PartitionProblem::phase_prefix).
    const bool phases = options.phases && P.level_time_prefix.empty();
    std::vector<std::vector<double>> per_class;
    for (const Class& c : classes) {
      std::vector<double> prefix(n + 1, 0.0);
      PartitionProblem::PhasePrefix pp;
      if (phases) pp = {prefix, prefix, prefix, prefix, prefix};
      for (size_t i = 0; i < n; ++i) {
        const Layer& layer = s.model.layers[i];
        const double f = layer_phase_time(cost, layer, work[i], Phase::Forward, *c.gpu, c.links, pc.tp);
        const double b = layer_phase_time(cost, layer, work[i], Phase::BackwardInput, *c.gpu, c.links, pc.tp);
        // W less what one backward pass saves (CostModel::full_backward_saving): a bound for W alone and for
        // B and W as one action.
        const double w = layer_phase_time(cost, layer, work[i], Phase::BackwardWeight, *c.gpu, c.links, pc.tp) -
                         cost.full_backward_saving(layer, work[i], pc.tp);
        prefix[i + 1] = prefix[i] + (f + b + w);  // summed as layer_step_costs sums it
        if (!phases) continue;
        const double cf = cost.expert_comm_time(work[i], Phase::Forward, c.links.ep);
        const double cb = cost.expert_comm_time(work[i], Phase::BackwardInput, c.links.ep);
        pp.f[i + 1] = pp.f[i] + f - cf;
        pp.b[i + 1] = pp.b[i] + b - cb;
        pp.w[i + 1] = pp.w[i] + w;
        pp.comm_f[i + 1] = pp.comm_f[i] + cf;
        pp.comm_b[i + 1] = pp.comm_b[i] + cb;
      }
      per_class.push_back(std::move(prefix));
      if (phases) P.phase_prefix.push_back(std::move(pp));
    }
    P.level_time_prefix.push_back(std::move(per_class));

    std::vector<double> act(n + 1, 0.0), wg(n + 1, 0.0);
    for (size_t i = 0; i < n; ++i) {
      act[i + 1] = act[i] + work[i].activation_bytes;
      wg[i + 1] = wg[i] + work[i].weight_grad_bytes;
    }
    P.level_act_prefix.push_back(std::move(act));
    P.level_wg_prefix.push_back(std::move(wg));
    std::vector<double> working(n);
    for (size_t i = 0; i < n; ++i) working[i] = work[i].working_bytes + zero3_layer_working_bytes(pc, work[i].parameters);
    P.level_working.emplace_back(working);
  }
  for (int st = 0; st < P.stages; ++st)
    P.stage_class.push_back(rank_class[static_cast<size_t>(P.stage_rank[static_cast<size_t>(st)])]);
  P.act_prefix = P.level_act_prefix.front();
  P.wg_prefix = P.level_wg_prefix.front();

  const LayerWorks& work = *P.level_work.front();
  P.param_prefix.assign(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) P.param_prefix[i + 1] = P.param_prefix[i] + work[i].parameters;
  P.cut = boundary_bytes(s.model, work);

  for (int st = 0; st + 1 < P.stages; ++st) {
    // The ranks of copy 0's stages st and st + 1 (copy 1 crosses the same links the other way).
    const int ra = P.copies == 1 ? P.stage_rank[static_cast<size_t>(st)] : st;
    const int rb = P.copies == 1 ? P.stage_rank[static_cast<size_t>(st) + 1] : st + 1;
    const bool remote = ra != rb && !cluster.ideal;
    LinkSpec fwd{kInf, 0}, bwd{kInf, 0};
    if (remote) {
      const int ga = pipeline_rank_gpu(pc, ra), gb = pipeline_rank_gpu(pc, rb);
      fwd = cost.p2p_link(cluster.link(ga, gb));
      bwd = cost.p2p_link(cluster.link(gb, ga));
    }
    P.remote.push_back(remote);
    P.forward_link.push_back(fwd);
    P.backward_link.push_back(bwd);
  }

  P.dispatch_s = cost.action_overhead_s();
  P.w_dispatch_s = cost.full_backward_one_action() ? 0.0 : P.dispatch_s;
  // A part's copies shard its ZeRO state as copies x dp members, as stage_costs() charges it.
  ParallelConfig sharding = pc;
  sharding.dp *= P.copies;
  P.state_per_parameter = state_bytes_per_parameter(cost, sharding, s.workload.precision == Precision::Fp8);
  for (int st = 0; st < P.stages; ++st)  // as stage_costs() charges it: on each rank's first stage
    P.stage_reserve.push_back(st < P.ranks && !cluster.ideal ? cost.memory_reserve_bytes() : 0.0);
  const bool embedding = s.model.transformer && s.model.layers.front().kind == LayerKind::Embedding;
  const double own_table =
      embedding ? static_cast<double>(s.model.transformer->vocab) * s.model.transformer->hidden / pc.tp * P.state_per_parameter : 0;
  P.shared_table_prefix.assign(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i)
    P.shared_table_prefix[i + 1] = P.shared_table_prefix[i] + (s.model.layers[i].kind == LayerKind::Mtp ? own_table : 0.0);
  for (int st = 0; st < P.stages; ++st) P.shares_table.push_back(P.stage_rank[static_cast<size_t>(st)] == P.stage_rank[0]);
  for (int r = 0; r < P.ranks; ++r) {
    double limit = cluster.memory_limit_at(P.rank_gpu[static_cast<size_t>(r)]);
    if (P.copies == 2) limit = std::min(limit, cluster.memory_limit_at(pipeline_rank_gpu(pc, pc.pp - 1 - r)));
    P.rank_limit.push_back(limit);
  }

  if (P.copies == 1) {
    P.holdings = options.holdings ? borrowed(options.holdings)
                                  : std::make_shared<const std::vector<std::vector<Holding>>>(activation_holdings(schedule));
  } else {
    // A pair's holdings: rank v's (parts v, P - 1 - v in its stage order) and rank P - 1 - v's (parts P - 1 - v,
    // v: its chunks the other way round), the Pareto-maximal of both.
    std::optional<std::vector<std::vector<Holding>>> made;  // the caller's are read in place
    const std::vector<std::vector<Holding>>& own = options.holdings ? *options.holdings : made.emplace(activation_holdings(schedule));
    std::vector<std::vector<Holding>> pairs(static_cast<size_t>(P.ranks));
    for (int v = 0; v < P.ranks; ++v) {
      std::vector<Holding> both = own[static_cast<size_t>(v)];
      for (Holding h : own[static_cast<size_t>(pc.pp - 1 - v)]) {
        std::reverse(h.full.begin(), h.full.end());
        std::reverse(h.partial.begin(), h.partial.end());
        both.push_back(std::move(h));
      }
      pairs[static_cast<size_t>(v)] = pareto(std::move(both), covers);
    }
    P.holdings = std::make_shared<const std::vector<std::vector<Holding>>>(std::move(pairs));
  }
  P.chunk_holdings.resize(static_cast<size_t>(P.ranks));
  for (int r = 0; r < P.ranks; ++r) {
    const std::vector<Holding>& hs = (*P.holdings)[static_cast<size_t>(r)];
    const size_t chunks = static_cast<size_t>(seen[static_cast<size_t>(r)]);
    auto& per_chunk = P.chunk_holdings[static_cast<size_t>(r)];
    per_chunk.resize(chunks);
    for (size_t c = 0; c < chunks; ++c) {
      std::vector<std::pair<int, int>> pairs;
      for (const Holding& h : hs) pairs.emplace_back(h.full[c], h.partial[c]);
      per_chunk[c] = pareto(std::move(pairs), [](const std::pair<int, int>& a, const std::pair<int, int>& b) {
        return a.first >= b.first && a.first + a.second >= b.first + b.second;
      });
    }
  }
  return P;
}

int PartitionProblem::lightest_fitting_level(int s, int begin, int end) const {
  const int last = static_cast<int>(levels.size()) - 1;
  // One chunk per rank here: the stage's state and holding are its rank's whole memory.
  const double room = rank_limit[static_cast<size_t>(stage_rank[static_cast<size_t>(s)])] - state_bytes(s, begin, end);
  for (int l = 0; l < last; ++l)
    if (chunk_peak_at(l, s, begin, end) <= room) return l;
  return last;
}

std::vector<Recompute> PartitionProblem::stage_levels(const std::vector<LayerRange>& ranges) const {
  std::vector<Recompute> out;
  for (int st = 0; st < stages; ++st) {
    const LayerRange& lr = ranges[static_cast<size_t>(st)];
    out.push_back(levels[static_cast<size_t>(level(st, lr.first, lr.last + 1))]);
  }
  return out;
}

LayerWorks PartitionProblem::work_for(const std::vector<LayerRange>& ranges) const {
  LayerWorks out;
  out.reserve(static_cast<size_t>(layers));
  for (int st = 0; st < stages; ++st) {
    const LayerRange& lr = ranges[static_cast<size_t>(st)];
    const LayerWorks& work = *level_work[static_cast<size_t>(level(st, lr.first, lr.last + 1))];
    out.append(work, static_cast<size_t>(lr.first), static_cast<size_t>(lr.last) + 1);
  }
  return out;
}

double PartitionProblem::rank_memory(int r, const std::vector<LayerRange>& ranges) const {
  double state = 0, working = 0;
  std::vector<double> a, wg;
  for (int st = 0; st < stages; ++st) {
    if (stage_rank[static_cast<size_t>(st)] != r) continue;
    const LayerRange& lr = ranges[static_cast<size_t>(st)];
    const size_t l = static_cast<size_t>(level(st, lr.first, lr.last + 1));
    const std::vector<double>& act = level_act_prefix[l];
    const std::vector<double>& wgp = level_wg_prefix[l];
    state += state_bytes(st, lr.first, lr.last + 1);
    working = std::max(working, level_working[l].max(static_cast<size_t>(lr.first), static_cast<size_t>(lr.last) + 1));
    a.push_back(act[static_cast<size_t>(lr.last) + 1] - act[static_cast<size_t>(lr.first)]);
    wg.push_back(wgp[static_cast<size_t>(lr.last) + 1] - wgp[static_cast<size_t>(lr.first)]);
  }
  double peak = 0;
  for (const Holding& h : (*holdings)[static_cast<size_t>(r)]) {
    double bytes = 0;
    for (size_t c = 0; c < a.size(); ++c) bytes += h.full[c] * a[c] + h.partial[c] * wg[c];
    peak = std::max(peak, bytes);
  }
  return state + peak + working;
}

double PartitionProblem::bottleneck(const std::vector<LayerRange>& ranges) const {
  double worst = 0;
  for (int st = 0; st < stages; ++st) {
    const LayerRange& lr = ranges[static_cast<size_t>(st)];
    worst = std::max(worst, stage_time(st, lr.first, lr.last + 1));
  }
  return worst;
}

}  // namespace pw
