#include "planner/search_bounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/special_values.hpp"
#include "schedules/timing.hpp"

namespace pw {
namespace {

// Stages needed to hold the layers in order with no stage above `cap` (greedy: each stage takes as many
// layers as fit, which is optimal for a chain; a layer above `cap` makes it impossible).
int stages_needed(const std::vector<double>& cost, double cap) {
  int stages = 1;
  double load = 0;
  for (double c : cost) {
    if (c > cap) return std::numeric_limits<int>::max();
    if (load + c > cap) {
      ++stages;
      load = 0;
    }
    load += c;
  }
  return stages;
}

// make_layer_totals' and make_layer_table's sums, layer by layer in order (the same figures either way).
void add_totals(LayerTable& t, const LayerWork& w) {
  t.parameters += w.parameters;
  t.activations += w.activation_bytes;
}

}  // namespace

AllToAllLinks least_all_to_all_links(const Cluster& cluster, int ep, bool flex) {
  AllToAllLinks l;
  if (ep <= 1 || cluster.ideal || cluster.measured || !cluster.node_groups.empty()) return l;
  if (!(cluster.intra_node.bandwidth_bytes_per_s >= cluster.inter_node.bandwidth_bytes_per_s &&
        cluster.intra_node.latency_s <= cluster.inter_node.latency_s))
    return l;
  l.ranks = ep;
  const int per_node = std::max(1, cluster.gpus_per_node);
  l.in_node = std::min(ep, per_node) - 1;
  l.across = ep - std::min(ep, per_node);
  l.in_node_link = flex ? LinkSpec{std::numeric_limits<double>::infinity(), 0} : cluster.intra_node;
  l.across_link = cluster.inter_node;
  return l;
}

std::vector<int> distinct_tp_groups(const Cluster& cluster, int tp, const std::vector<int>& tp_group_gpus) {
  using Key = std::tuple<std::string, double, double, double, double, double>;
  std::vector<Key> seen;
  std::vector<int> out;
  for (int first : tp_group_gpus) {
    const GpuSpec& gpu = cluster.gpu_at(first);
    const LinkSpec link = group_link(cluster, first, 1, tp);
    Key key{gpu.name, gpu.peak_flops, gpu.hbm_bytes_per_s, gpu.memory_bytes, link.bandwidth_bytes_per_s, link.latency_s};
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    out.push_back(first);
  }
  return out;
}

LayerTable make_layer_totals(const Model& model, const Workload& resolved) {
  if (resolved.recompute == Recompute::PerStage) {  // the memory of full recompute, as make_layer_table's work
    Workload w = resolved;
    w.recompute = Recompute::Full;
    return make_layer_totals(model, w);
  }
  LayerTable t;
  LayerWorks works;
  append_layer_works(model, 0, model.num_layers() - 1, resolved, works);
  for (const LayerWork& w : works) add_totals(t, w);
  return t;
}

LayerTable per_stage_table(const LayerTable& none, LayerTable full) {
  full.fastest = none.fastest;
  full.fastest_fb = none.fastest_fb;
  full.fastest_compute = none.fastest_compute;
  full.fastest_fb_compute = none.fastest_fb_compute;
  full.fastest_bw = none.fastest_bw;
  full.fastest_b = none.fastest_b;
  full.total_time = none.total_time;
  full.max_time = none.max_time;
  return full;
}

LayerTable make_layer_table(const Model& model, const Workload& resolved, int tp, const Cluster& cluster,
                            const CostModel& cost, const std::vector<int>& tp_group_gpus, const AllToAllLinks& ep_links) {
  if (resolved.recompute == Recompute::PerStage) {
    // Every stage is at least as fast as without recompute and needs at least the memory of full
    // recompute, whatever level it takes: times from the one, work (memory) from the other.
    Workload w = resolved;
    w.recompute = Recompute::None;
    const LayerTable none = make_layer_table(model, w, tp, cluster, cost, tp_group_gpus, ep_links);
    w.recompute = Recompute::Full;
    return per_stage_table(none, make_layer_table(model, w, tp, cluster, cost, tp_group_gpus, ep_links));
  }
  LayerTable t;
  append_layer_works(model, 0, model.num_layers() - 1, resolved, t.work);
  for (const LayerWork& w : t.work) add_totals(t, w);
  t.fastest.assign(model.layers.size(), kInf);
  t.fastest_fb.assign(model.layers.size(), kInf);
  t.fastest_compute.assign(model.layers.size(), kInf);
  t.fastest_fb_compute.assign(model.layers.size(), kInf);
  t.fastest_bw.assign(model.layers.size(), kInf);
  t.fastest_b.assign(model.layers.size(), kInf);
  // A layer costs at least its time on the fastest (GPU type, tp link) class in use.
  for (int first : distinct_tp_groups(cluster, tp, tp_group_gpus)) {
    const GpuSpec& gpu = cluster.gpu_at(first);
    const LinkSpec link = group_link(cluster, first, 1, tp);
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const auto compute = [&](Phase ph) { return cost.phase_time(model.layers[i], t.work[i], ph, gpu, link, tp); };
      const auto comm = [&](Phase ph) { return cost.expert_comm_time(t.work[i], ph, ep_links); };
      const double f_compute = compute(Phase::Forward), b_compute = compute(Phase::BackwardInput),
                   w_compute = compute(Phase::BackwardWeight);
      // W less what one backward pass saves: a bound for W alone and for B + W as one action.
      const double saving = cost.full_backward_saving(model.layers[i], t.work[i], tp);
      const double f = f_compute + comm(Phase::Forward);
      const double b = b_compute + comm(Phase::BackwardInput);
      const double w = w_compute + comm(Phase::BackwardWeight) - saving;
      t.fastest_compute[i] = std::min(t.fastest_compute[i], f_compute + b_compute + w_compute - saving);
      t.fastest_fb_compute[i] = std::min(t.fastest_fb_compute[i], f_compute + b_compute);
      t.fastest_bw[i] = std::min(t.fastest_bw[i], b + w);
      t.fastest_b[i] = std::min(t.fastest_b[i], b);
      t.fastest[i] = std::min(t.fastest[i], f + b + w);
      t.fastest_fb[i] = std::min(t.fastest_fb[i], f + b);
    }
  }
  for (double c : t.fastest) {
    t.total_time += c;
    t.max_time = std::max(t.max_time, c);
  }
  return t;
}

namespace {

// Bisection for the smallest cap that `fits` accepts, from below: returns a value no split reaches
// (or `lo` itself), so that it stays a lower bound however the last comparisons round. To a millionth: a
// looser bound only drops fewer candidates, never a wrong one, and a millionth of a step drops hardly fewer
// (to 1e-12 it took 40 passes where 20 do, 3% of a 32K-token DeepSeek-V3 search).
template <typename Fits>
double smallest_cap(double lo, double hi, Fits fits) {
  if (!(hi > lo)) return lo;
  for (int i = 0; i < 100 && hi - lo > 1e-6 * hi; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (fits(mid))
      hi = mid;
    else
      lo = mid;
  }
  return lo;
}

}  // namespace

// Proof of the busy part. The simulator's busy time of rank r is m x the sum over its stages of F + B + W
// (every compute action of a stage runs once per micro-batch; an F&B composite costs its halves), and
// its step time is at least the last compute end of every rank, hence at least every rank's busy time.
// A stage's F + B + W is the sum over its layers of their times on the stage's GPU, each at least the
// layer's `fastest`. With one stage per rank the busiest rank therefore carries at least the largest
// stage sum of `fastest`, which is at least the minimum over all contiguous splits (stages_needed packs
// greedily, which is optimal for a chain). With several chunks per rank, the busiest rank carries at
// least the average of all work over pp ranks and at least the largest layer. With two copies of the model
// every micro-batch still crosses every layer once (the average holds), but a layer's micro-batches are
// shared by the two ranks holding it (half the largest layer), and the fill below is one copy's chain of
// pp x chunks / 2 stages with its m / 2 micro-batches.
//
// Proof of the fill part. Take any stage k. Its first action is an F (a B needs its F), which needs the
// forward of that micro-batch through stages 0 .. k-1 first: it starts no earlier than their F times.
// Its m F and m B run on one rank, one at a time, so its last B ends at least m (F_k + B_k) later. That
// last B's input gradient then still has to pass B of stages k-1 .. 0. So the step takes at least
// P(<k) + m seg_k, with P the F + B of the earlier stages' layers and seg_k stage k's. Any split has such
// a k for every stage, so the step is at least the minimum over splits of the largest of these; the
// bisection finds it with empty stages allowed (no constraint), which can only lower it. A greedy pass
// that gives each stage as many layers as fit is optimal: consuming more layers earlier only raises the
// next stage's allowance, P (1 - 1/m) + C / m.
// Proof. overlapped_pair_time is at least both halves' compute, at least the forward half and at least the
// backward half (core/overlapped_pair.hpp), so at least any mix a x compute + b x F + c x (B + W) of them with
// a + b + c = 1, charged half by half: the forward half a x its compute + b x F, the backward half a x its
// compute + c x (B + W). An action alone costs at least its part of each. So each vertex (compute, forward,
// backward) is a per-layer cost that no schedule's actions undercut, additive over layers as the bounds
// need; the fill chain takes the same parts of F + B (the backward vertex: B alone). The host's floor
// (CostModel::host_time) only lengthens phases and composites; the layer tables leave it out and stay below.
LayerTable with_all_to_alls_hidden(const LayerTable& t) {
  const size_t n = t.fastest.size();
  std::vector<double> forward(n), forward_b(n);
  double compute = 0, forwards = 0, backwards = 0;
  for (size_t i = 0; i < n; ++i) {
    forward[i] = t.fastest[i] - t.fastest_bw[i];
    compute += t.fastest_compute[i];
    forwards += forward[i];
    backwards += t.fastest_bw[i];
  }
  LayerTable out;
  out.parameters = t.parameters;
  out.activations = t.activations;
  if (compute >= forwards && compute >= backwards) {
    out.fastest = t.fastest_compute;
    out.fastest_fb = t.fastest_fb_compute;
  } else if (forwards >= backwards) {
    out.fastest = forward;
    out.fastest_fb = forward;
  } else {
    out.fastest = t.fastest_bw;
    out.fastest_fb = t.fastest_b;
  }
  out.total_time = 0;
  out.max_time = 0;
  for (double c : out.fastest) {
    out.total_time += c;
    out.max_time = std::max(out.max_time, c);
  }
  return out;
}

double step_time_bound(const LayerTable& t, int pp, int chunks, int microbatches, int copies) {
  const double all = microbatches;
  // Each copy's micro-batches: with two copies a layer runs half of them on each of the two ranks holding it.
  const double m = all / copies;
  double busy = std::max(t.total_time / pp, t.max_time / copies);  // a rank's share of one micro-batch's work
  if (chunks == 1 && pp > 1)
    busy = smallest_cap(busy, t.total_time, [&](double cap) { return stages_needed(t.fastest, cap) <= pp; });

  const int stages = pp * chunks / copies;
  double total_fb = 0, max_fb = 0;
  for (double c : t.fastest_fb) {
    total_fb += c;
    max_fb = std::max(max_fb, c);
  }
  auto fill_fits = [&](double cap) {
    size_t i = 0;
    double before = 0;
    for (int k = 0; k < stages && i < t.fastest_fb.size(); ++k) {
      double seg = 0;
      while (i < t.fastest_fb.size() && before + m * (seg + t.fastest_fb[i]) <= cap) seg += t.fastest_fb[i++];
      before += seg;
    }
    return i == t.fastest_fb.size();
  };
  const double fill = smallest_cap(std::max(total_fb, m * max_fb), m * total_fb, fill_fits);
  return std::max(all * busy, fill);
}

// Proof. A rank's simulated peak is its model state (parameters x bytes per parameter, plus the reserve on
// its first stage) plus its activation peak. Take micro-batch 0 and the rank's highest stage k: when F(k, 0)
// starts, F(s, 0) has run on every lower stage s of the rank, and no B(s, 0) has (it needs the gradient of
// the last stage, whose F follows F(k, 0)); so the rank holds one micro-batch of activations of all its
// stages at once, and its peak is at least their sum. The worst rank holds at least the average over pp
// ranks of these sums, which is (total state + total activations) / pp, each rank's reserve counted once.
double memory_bound(const LayerTable& t, int pp, double state_per_parameter, double reserve_bytes) {
  return (t.parameters * state_per_parameter + t.activations) / pp + reserve_bytes;
}

ScheduleSummary summarize(const Schedule& s) {
  ScheduleSummary out;
  out.placement = s.placement;
  const int stages = s.num_stages();
  out.max_full.assign(static_cast<size_t>(stages), 0);
  out.point_full.assign(static_cast<size_t>(stages), 0);
  std::vector<std::vector<int>> rank_stages(static_cast<size_t>(s.num_ranks()));
  for (int st = 0; st < stages; ++st) rank_stages[static_cast<size_t>(s.placement.rank_of(st))].push_back(st);
  std::vector<int> full(static_cast<size_t>(stages), 0);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    int total = 0, best = 0;  // micro-batches the rank holds in full over all its stages, now and at most
    for (const Action& a : s.ranks[r]) {
      const auto st = static_cast<size_t>(a.stage);
      switch (a.op) {
        case Op::F:
        case Op::FB:
          // An allocation point: every count of the rank is at its value here.
          out.max_full[st] = std::max(out.max_full[st], ++full[st]);
          if (++total > best) {
            best = total;
            for (int own : rank_stages[r]) out.point_full[static_cast<size_t>(own)] = full[static_cast<size_t>(own)];
          }
          if (a.op == Op::FB) {
            --full[static_cast<size_t>(a.stage2)];
            --total;
          }
          break;
        case Op::B:
        case Op::BW:
          --full[st];
          --total;
          break;
        default: break;
      }
    }
  }
  return out;
}

// Proof. At its point_full allocation point a rank holds point_full[s] micro-batches of every one of its
// stages s in full, so its peak is at least its model state and reserve plus the sum of point_full[s]
// times the stage's activations; the worst rank is at least the average of these over the ranks, which
// is (all parameters x bytes per parameter + sum over layers of point_full[stage of the layer] x its
// activations) / ranks + reserve. The split decides which stage each layer is in; the dynamic programme
// takes the smallest sum over contiguous splits with every stage non-empty.
static double held_average_bound(const LayerTable& t, const ScheduleSummary& s, double state_per_parameter,
                                 double reserve_bytes) {
  const int n = static_cast<int>(t.work.size()), stages = static_cast<int>(s.point_full.size());
  if (stages < 1 || stages > n) return 0;
  std::vector<double> act(static_cast<size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i) act[static_cast<size_t>(i) + 1] = act[static_cast<size_t>(i)] + t.work[static_cast<size_t>(i)].activation_bytes;
  // best[i]: the least held activation bytes with layers [0, i) in stages 0 .. k, stage k ending at i.
  std::vector<double> best(static_cast<size_t>(n) + 1, kInf), next(static_cast<size_t>(n) + 1, kInf);
  for (int i = 1; i <= n; ++i) best[static_cast<size_t>(i)] = s.point_full[0] * act[static_cast<size_t>(i)];
  for (int k = 1; k < stages; ++k) {
    const double h = s.point_full[static_cast<size_t>(k)];
    double lowest = kInf;  // min over j < i of best[j] - h act[j], j >= k (stages 0 .. k-1 non-empty)
    std::fill(next.begin(), next.end(), kInf);
    for (int i = k + 1; i <= n; ++i) {
      lowest = std::min(lowest, best[static_cast<size_t>(i - 1)] - h * act[static_cast<size_t>(i - 1)]);
      next[static_cast<size_t>(i)] = lowest + h * act[static_cast<size_t>(i)];
    }
    std::swap(best, next);
  }
  return (t.parameters * state_per_parameter + best[static_cast<size_t>(n)]) / s.placement.ranks + reserve_bytes;
}

// Proof. Every stage holds max_full of its micro-batches in full at one allocation point of its rank (an F
// of that stage: the count only rises at its own F), so that rank's peak is at least the stage's full
// activations there (partial holdings and other chunks add bytes, never remove them) plus the rank's model
// state, which includes the stage's parameters and the
// GPU's reserve. The worst rank is therefore at least the largest of these per-stage sums, for the split
// used, hence at least their minimum over splits; stages_fit packs greedily, which is optimal because a
// stage's allowance does not depend on the layers before it.
double memory_bound(const LayerTable& t, const ScheduleSummary& s, double state_per_parameter, double reserve_bytes) {
  const double average = std::max(memory_bound(t, s.placement.ranks, state_per_parameter, reserve_bytes),
                                  held_average_bound(t, s, state_per_parameter, reserve_bytes));
  const int stages = static_cast<int>(s.max_full.size());
  auto fits = [&](double cap) {
    size_t i = 0;
    for (int k = 0; k < stages && i < t.work.size(); ++k) {
      const double h = std::max(s.max_full[static_cast<size_t>(k)], 1);
      double used = reserve_bytes;
      while (i < t.work.size()) {
        const double add = t.work[i].parameters * state_per_parameter + h * t.work[i].activation_bytes;
        if (used + add > cap) break;
        used += add;
        ++i;
      }
    }
    return i == t.work.size();
  };
  double hi = reserve_bytes + t.parameters * state_per_parameter;
  for (int h : s.max_full) hi = std::max(hi, reserve_bytes + t.parameters * state_per_parameter + h * t.activations);
  return std::max(average, smallest_cap(reserve_bytes, hi, fits));
}

std::vector<double> rank_peak_memory(const Schedule& s, const std::vector<StageCost>& stages) {
  const int ranks = s.num_ranks();
  std::vector<double> state(static_cast<size_t>(ranks), 0.0), working(state);
  for (int st = 0; st < s.num_stages(); ++st) {
    const size_t r = static_cast<size_t>(s.placement.rank_of(st));
    state[r] += stages[static_cast<size_t>(st)].model_state_bytes;
    working[r] = std::max(working[r], stages[static_cast<size_t>(st)].working_bytes);
  }
  std::vector<double> out(static_cast<size_t>(ranks), 0.0);
  for (int r = 0; r < ranks; ++r) {
    // The simulator's order of additions and subtractions, so that the peak is the same number.
    double bytes = 0, peak = 0;
    for (const Action& a : s.ranks[static_cast<size_t>(r)]) {
      const StageCost& c = stages[static_cast<size_t>(a.stage)];
      switch (a.op) {
        case Op::F:
        case Op::FB:
          bytes += c.activation_bytes;
          peak = std::max(peak, bytes);
          if (a.op == Op::FB) bytes -= stages[static_cast<size_t>(a.stage2)].activation_bytes;
          break;
        case Op::B:
          bytes -= c.activation_bytes - c.weight_grad_bytes;
          peak = std::max(peak, bytes);  // a B that keeps more for W than F kept grows the memory
          break;
        case Op::W: bytes -= c.weight_grad_bytes; break;
        case Op::BW: bytes -= c.activation_bytes; break;
        default: break;
      }
    }
    out[static_cast<size_t>(r)] = state[static_cast<size_t>(r)] + peak + working[static_cast<size_t>(r)];
  }
  return out;
}

// Proof. A rank runs its actions one after another, each for its stage's F, B, W or B + W (BW): its last ends
// at least their sum after its first starts. Its first is a forward of some stage k and micro-batch i (a
// backward needs its forward, a W its backward), which needs F(s, i) of every stage s < k first, one after
// another on their ranks: it starts no earlier than their F. When its last is a backward (B or BW) of stage k
// and micro-batch i, the backwards of micro-batch i on stages k - 1 .. 0 need it and run one after another:
// the last compute ends no earlier than their B after it. asap_timing's makespan is therefore at least every
// rank's head, actions and tail (transfers only add), and step_time_bound adds the slowest rank's optimizer
// step after it, as this does. Without a fixed order (zb-auto's, made later from the costs, of the same
// actions) the last action is not known: no tail. With copies of the model the chain before a stage is not
// the stages below it: no head or tail.
double rank_path_bound(const Schedule& s, const std::vector<StageCost>& stages, bool order_fixed) {
  if (has_composites(s)) return 0;
  const bool chain = s.copies == 1;
  std::vector<double> f_before(stages.size() + 1, 0.0), b_before(stages.size() + 1, 0.0);  // over stages < k
  for (size_t k = 0; k < stages.size(); ++k) {
    f_before[k + 1] = f_before[k] + stages[k].forward_s;
    // A BW on a stage below may take less than its B alone where one pass saves more than W.
    b_before[k + 1] = b_before[k] + std::min(stages[k].backward_input_s, stages[k].full_backward_s());
  }
  std::vector<double> optimizer(static_cast<size_t>(s.num_ranks()), 0.0);
  for (int st = 0; st < s.num_stages(); ++st)
    optimizer[static_cast<size_t>(s.placement.rank_of(st))] += stages[static_cast<size_t>(st)].optimizer_s;
  double longest = 0;
  for (const std::vector<Action>& list : s.ranks) {
    if (list.empty()) continue;
    double path = 0;
    for (const Action& a : list) {
      const StageCost& c = stages[static_cast<size_t>(a.stage)];
      if (a.op == Op::F) path += c.forward_s;
      if (a.op == Op::B) path += c.backward_input_s;
      if (a.op == Op::W) path += c.backward_weight_s;
      if (a.op == Op::BW) path += c.full_backward_s();
    }
    if (chain) {
      path += f_before[static_cast<size_t>(list.front().stage)];
      const Action& last = list.back();
      if (order_fixed && (last.op == Op::B || last.op == Op::BW)) path += b_before[static_cast<size_t>(last.stage)];
    }
    longest = std::max(longest, path);
  }
  return longest + *std::max_element(optimizer.begin(), optimizer.end());
}

// Proof. The simulator runs each rank's list in order, starting an action when the rank is free and its
// inputs have arrived; a transfer starts no earlier than its producer ends (later when the rank's send lane
// is busy) and takes at least latency + bytes / bandwidth (sharing a link only slows it). asap_timing runs
// the same orders under the same rules with every transfer at exactly that minimum, so by induction over
// the actions every start and end it computes is no later than the simulator's. The simulator starts a
// stage's gradient reduction when its last weight gradient is done and runs a rank's reductions one after
// another; the end of such a queue, max over k of (k-th arrival + the durations arriving from then on),
// does not decrease when arrivals come later. The flush ends no earlier than the last compute and the last
// reduction, and the synchronous optimizer step then takes the slowest rank's optimizer time.
double step_time_bound(const Schedule& s, const std::vector<StageCost>& stages, const std::vector<int>& rank_gpu,
                       const Cluster& cluster, const CostModel& cost) {
  const int n = s.num_stages();
  StageTimes times;
  times.all_to_all_sm_share = cost.all_to_all_sm_share();
  for (const StageCost& c : stages) {
    times.f.push_back(c.forward_s);
    times.b.push_back(c.backward_input_s);
    times.w.push_back(c.backward_weight_s);
    times.fb.push_back(c.overlapped_fb_s);  // 0: the halves' sum, as the simulator charges it
    times.bw_saving.push_back(c.full_backward_saving_s);
    times.comm_f.push_back(c.expert_comm_forward_s);
    times.comm_b.push_back(c.expert_comm_backward_s);
    times.host_f.push_back(c.host_forward_s);
    times.host_b.push_back(c.host_backward_s);
  }
  auto alone = [&](int from_rank, int to_rank, double bytes) {
    if (cluster.ideal) return 0.0;
    LinkSpec l = cluster.link(rank_gpu[static_cast<size_t>(from_rank)], rank_gpu[static_cast<size_t>(to_rank)]);
    l = cost.p2p_link(l);
    return bytes / l.bandwidth_bytes_per_s + l.latency_s;
  };
  for (int st = 0; st + 1 < n; ++st) {
    const int a = s.placement.rank_of(st), b = s.placement.rank_of(st + 1);
    const double bytes = stages[static_cast<size_t>(st)].output_bytes;
    times.comm.push_back(a == b ? 0.0 : std::min(alone(a, b, bytes), alone(b, a, bytes)));
  }
  const GradientTiming timing = asap_gradient_timing(s, times);
  const std::vector<double>&grad_done = timing.end, &grad_start = timing.start;
  double flush = timing.makespan;
  double optimizer = 0;
  for (int r = 0; r < s.num_ranks(); ++r) {
    std::vector<std::pair<double, double>> queue;  // (arrival, duration)
    double opt = 0;
    for (int st = 0; st < n; ++st) {
      if (s.placement.rank_of(st) != r) continue;
      const StageCost& c = stages[static_cast<size_t>(st)];
      opt += c.optimizer_s;
      if (!(c.grad_reduce_s > 0)) continue;
      // The simulator's buckets: bucket b of k queues at (b + 1) / k of the last gradient action, the
      // last one (with the all-gather) at its end; each arrives no later here.
      const int k = std::max(1, c.grad_buckets);
      const double begin = grad_start[static_cast<size_t>(st)], end = grad_done[static_cast<size_t>(st)];
      if (k == 1) {
        queue.emplace_back(end, c.grad_reduce_s);
        continue;
      }
      for (int b = 0; b + 1 < k; ++b) queue.emplace_back(begin + (end - begin) * (b + 1) / k, c.grad_bucket_s);
      queue.emplace_back(end, c.grad_bucket_s + c.grad_gather_s);
    }
    std::sort(queue.begin(), queue.end());
    double t = 0;
    for (const auto& [arrival, duration] : queue) t = std::max(t, arrival) + duration;
    flush = std::max(flush, t);
    optimizer = std::max(optimizer, opt);
  }
  return flush + optimizer;
}

}  // namespace pw
