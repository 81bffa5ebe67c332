#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "schedules/families.hpp"
#include "schedules/timing.hpp"

namespace pw {

// zb-auto: the zero-bubble paper's heuristic (Qi et al. 2023, section 4.1; the manual_order of the
// sail-sg repository's auto_schedule.py) on the given stage times, communication times and memory
// limits. It places micro-batches one at a time: a warm-up sized so that each stage's forwards fill
// the time until its first B can arrive (within its memory), then per micro-batch a forward on every
// stage and a backward on every stage, inserting Ws before a pass when memory must be freed or when
// the pass's input has not arrived yet (the bubble a W can fill). Three switches make eight variants:
//   bubble_before_first_b  let a warm-up forward overrun the first B's arrival;
//   prioritize_b           hold a forward back when the next stage already lags two forwards behind;
//   fill_small_bubbles     fill with a W also a wait shorter than the worst stage's bubble so far.
// Every variant, and 1F1B within the same limits, is timed with asap_timing(); the fastest wins
// (the earlier on a tie), so the result is never slower than 1F1B.
namespace {

enum Kind { kF = 0, kB = 1, kW = 2 };

struct Inputs {
  int stages = 0, m = 0;
  std::vector<double> cost[3];  // per kind, per stage
  std::vector<double> mem[3];   // per kind, per stage: +1 at F, -(1 - held) at B, -held at W
  std::vector<double> limit;    // per stage
  std::vector<double> comm;     // per stage: to the next stage (0 for the last)
};

struct Variant {
  bool bubble_before_first_b, prioritize_b, fill_small_bubbles;
};

// Memory sums are fractions; a tolerance keeps 0.3 + 0.7 from failing a limit of 1.
constexpr double kSlack = 1e-9;

class Greedy {
 public:
  Greedy(const Inputs& in, Variant v) : in_(in), v_(v) {
    const auto n = static_cast<size_t>(in.stages);
    for (auto& c : count_) c.assign(n, 0);
    for (auto& t : end_) t.assign(n, std::vector<double>(static_cast<size_t>(in.m), 0.0));
    free_at_.assign(n, 0.0);
    held_.assign(n, 0.0);
    bubble_.assign(n, 0.0);
    order_.resize(n);
  }

  // The per-stage order, or nothing when this variant cannot keep within the memory limits.
  std::optional<std::vector<std::vector<Action>>> run() {
    const int S = in_.stages, m = in_.m;
    for (int i = 0; i < m; ++i) {
      if (i == 0) {
        if (!warm_up()) return std::nullopt;
        continue;
      }
      std::vector<int> wants_f(static_cast<size_t>(S), 0);
      for (int j = 0; j < S; ++j) wants_f[static_cast<size_t>(j)] = wants_forward(j) ? 1 : 0;
      for (int j = S - 2; j >= 0; --j)
        wants_f[static_cast<size_t>(j)] =
            std::min(wants_f[static_cast<size_t>(j)], wants_f[static_cast<size_t>(j + 1)]);
      for (int j = 0; j < S; ++j) {
        if (!wants_f[static_cast<size_t>(j)]) continue;
        if (!free_memory_for(j, kF)) return std::nullopt;
        if (j > 0) fill_wait(j, end(kF, j - 1, n(kF, j)) + comm(j - 1));
        put(j, kF);
      }
      for (int j = S - 1; j >= 0; --j) {
        if (!free_memory_for(j, kB)) return std::nullopt;
        if (j + 1 < S) fill_wait(j, end(kB, j + 1, i) + comm(j));
        if (j == 0 && n(kF, j) == m)
          while (n(kW, j) < n(kB, j)) put(j, kW);
        put(j, kB);
      }
    }
    for (int j = 0; j < S; ++j)
      while (n(kW, j) < m) put(j, kW);
    return order_;
  }

 private:
  const Inputs& in_;
  Variant v_;
  std::vector<int> count_[3];                // per kind, per stage: passes placed
  std::vector<std::vector<double>> end_[3];  // per kind, per stage, per micro-batch
  std::vector<double> free_at_, held_, bubble_;
  std::vector<std::vector<Action>> order_;

  int& n(int kind, int j) { return count_[kind][static_cast<size_t>(j)]; }
  double end(int kind, int j, int mb) const { return end_[kind][static_cast<size_t>(j)][static_cast<size_t>(mb)]; }
  double cost(int kind, int j) const { return in_.cost[kind][static_cast<size_t>(j)]; }
  double mem(int kind, int j) const { return in_.mem[kind][static_cast<size_t>(j)]; }
  double comm(int j) const { return in_.comm[static_cast<size_t>(j)]; }
  double limit(int j) const { return in_.limit[static_cast<size_t>(j)]; }
  double worst_bubble() const { return *std::max_element(bubble_.begin(), bubble_.end()); }

  void put(int j, int kind) {
    const auto sj = static_cast<size_t>(j);
    const int mb = n(kind, j);
    const double unblocked = free_at_[sj] + cost(kind, j);
    double t = unblocked;
    if (kind == kF && j > 0) t = std::max(t, end(kF, j - 1, mb) + comm(j - 1) + cost(kind, j));
    if (kind == kB && j + 1 < in_.stages) t = std::max(t, end(kB, j + 1, mb) + comm(j) + cost(kind, j));
    if (n(kF, j) > 0) bubble_[sj] += t - unblocked;
    free_at_[sj] = t;
    end_[kind][sj][static_cast<size_t>(mb)] = t;
    held_[sj] += mem(kind, j);
    const Op op = kind == kF ? Op::F : kind == kB ? Op::B : Op::W;
    order_[sj].push_back(Action{op, j, mb});
    ++n(kind, j);
  }

  // Ws until the next pass of `kind` fits; false when none is left to free.
  bool free_memory_for(int j, int kind) {
    while (held_[static_cast<size_t>(j)] + mem(kind, j) > limit(j) + kSlack) {
      if (n(kW, j) >= n(kB, j)) return false;
      put(j, kW);
    }
    return true;
  }

  // The next pass's input arrives at `arrival`: Ws that end by then are free; one more W overruns
  // the arrival, which pays when the wait is long compared with the bubbles so far.
  void fill_wait(int j, double arrival) {
    const auto sj = static_cast<size_t>(j);
    while (n(kW, j) < n(kB, j) && free_at_[sj] + cost(kW, j) <= arrival) put(j, kW);
    if (n(kW, j) < n(kB, j) && free_at_[sj] < arrival) {
      const bool small = arrival - free_at_[sj] <= worst_bubble() - bubble_[sj];
      if (!small || v_.fill_small_bubbles) put(j, kW);
    }
  }

  bool wants_forward(int j) {
    const int S = in_.stages;
    if (n(kF, j) >= in_.m) return false;
    if (!(v_.prioritize_b && j + 1 < S && n(kF, j) >= n(kF, j + 1) + 2)) return true;
    // The next stage lags: a forward here only pays if it (and the Ws it needs to fit) ends before
    // the next stage can send back its next backward.
    const double next_back = free_at_[static_cast<size_t>(j + 1)] + cost(kF, j + 1) + cost(kB, j + 1) + comm(j);
    const double now = free_at_[static_cast<size_t>(j)];
    if (now >= next_back) return false;
    double w_time = 0, held = held_[static_cast<size_t>(j)] + mem(kF, j);
    for (int extra = 0; held > limit(j) + kSlack && n(kW, j) + extra < n(kB, j); ++extra) {
      w_time += cost(kW, j);
      held += mem(kW, j);
    }
    if (now + cost(kF, j) + w_time <= next_back) return true;
    return next_back - now > worst_bubble() - bubble_[static_cast<size_t>(j)];
  }

  // Micro-batch 0 through every stage, each stage's extra warm-up forwards, then its backward back.
  bool warm_up() {
    const int S = in_.stages, m = in_.m;
    for (int j = 0; j < S; ++j) {
      if (held_[static_cast<size_t>(j)] + mem(kF, j) > limit(j) + kSlack) return false;
      put(j, kF);
    }
    std::vector<int> extra(static_cast<size_t>(S), 0);
    double first_b = 0;  // when stage j + 1's first backward ends
    for (int j = S - 1; j >= 0; --j) {
      if (j == S - 1) {
        first_b = end(kF, j, 0) + cost(kB, j);
        continue;
      }
      double held = held_[static_cast<size_t>(j)], t = free_at_[static_cast<size_t>(j)];
      int& e = extra[static_cast<size_t>(j)];
      while (n(kF, j) + e < m && held + mem(kF, j) <= limit(j) + kSlack) {
        if (v_.bubble_before_first_b ? t + cost(kF, j) > first_b + comm(j) : t >= first_b + comm(j)) break;
        held += mem(kF, j);
        t += cost(kF, j);
        ++e;
      }
      first_b = std::max(t, first_b + comm(j)) + cost(kB, j);
    }
    // Each stage runs fewer warm-up forwards than the one before it (as many when both run all m).
    // The repository's loop stops at m forwards even when the stage before runs fewer, which leaves
    // forwards whose inputs come only after the first backward, an order that waits forever.
    for (int j = 1; j < S; ++j) {
      int& mine = extra[static_cast<size_t>(j)];
      const int before = extra[static_cast<size_t>(j - 1)];
      while (mine > 0 && (mine > before || (mine == before && n(kF, j) + mine < m))) --mine;
    }
    for (int j = 0; j < S; ++j)
      for (int k = 0; k < extra[static_cast<size_t>(j)]; ++k) put(j, kF);
    for (int j = S - 1; j >= 0; --j) put(j, kB);
    return true;
  }
};

std::vector<double> per_stage(const std::vector<double>& given, int stages, double fallback, const char* field) {
  if (given.empty()) return std::vector<double>(static_cast<size_t>(stages), fallback);
  if (given.size() != static_cast<size_t>(stages))
    throw_bad_input("{}: zb-auto needs one value per stage ({} with --pp {}), got {}", field, stages, stages,
                    given.size());
  for (double x : given)
    if (!(x >= 0) || !std::isfinite(x)) throw_bad_input("{}: zb-auto needs finite values >= 0, got {}", field, x);
  return given;
}

Inputs read_inputs(const ScheduleSpec& spec) {
  const int p = spec.ranks;
  Inputs in;
  in.stages = p;
  in.m = spec.microbatches;
  in.cost[kF] = per_stage(spec.stage_f, p, 1.0, "stage_f");
  in.cost[kB] = per_stage(spec.stage_b, p, 1.0, "stage_b");
  in.cost[kW] = per_stage(spec.stage_w, p, 1.0, "stage_w");
  if (!spec.comm_s.empty() && spec.comm_s.size() != static_cast<size_t>(p - 1))
    throw_bad_input("comm_s: zb-auto needs one time per stage boundary ({} with --pp {}), got {}", p - 1, p,
                    spec.comm_s.size());
  in.comm = spec.comm_s.empty() ? std::vector<double>(static_cast<size_t>(p), 0.0) : spec.comm_s;
  for (double x : in.comm)
    if (!(x >= 0) || !std::isfinite(x)) throw_bad_input("comm_s: zb-auto needs finite times >= 0, got {}", x);
  in.comm.resize(static_cast<size_t>(p), 0.0);
  in.limit = per_stage(spec.memory_limit_microbatches, p, p, "memory_limit_microbatches");
  for (double x : in.limit)
    if (x < 1)
      throw_bad_input(
          "memory_limit_microbatches: a stage must hold at least 1 micro-batch's activations, got {}; "
          "raise the limit",
          x);
  const std::vector<double> held = per_stage(spec.stage_w_held, p, 1.0, "stage_w_held");
  for (int j = 0; j < p; ++j) {
    const double h = held[static_cast<size_t>(j)];
    if (h > 1) throw_bad_input("stage_w_held: a fraction of the activations, from 0 to 1, got {}", h);
    in.mem[kF].push_back(1.0);
    in.mem[kB].push_back(-(1.0 - h));
    in.mem[kW].push_back(-h);
  }
  return in;
}

// 1F1B with each rank's warm-up cut to its memory limit (and never longer than the rank before's).
Schedule limited_1f1b(const ScheduleSpec& spec, const Inputs& in) {
  Schedule s = empty_schedule(spec, 1);
  const int p = spec.ranks, m = spec.microbatches;
  int previous = m;
  for (int r = 0; r < p; ++r) {
    const int fits = static_cast<int>(std::floor(in.limit[static_cast<size_t>(r)] + kSlack)) - 1;
    const int warmup = std::min({p - r - 1, m, fits, previous});
    previous = warmup;
    auto& list = s.ranks[static_cast<size_t>(r)];
    int next_f = 0, next_b = 0;
    while (next_f < warmup) list.push_back(Action{Op::F, r, next_f++});
    while (next_f < m) {
      list.push_back(Action{Op::F, r, next_f++});
      list.push_back(Action{Op::BW, r, next_b++});
    }
    while (next_b < m) list.push_back(Action{Op::BW, r, next_b++});
  }
  return s;
}

}  // namespace

Schedule make_zb_auto(const ScheduleSpec& spec) {
  const Inputs in = read_inputs(spec);
  StageTimes times;
  times.f = in.cost[kF];
  times.b = in.cost[kB];
  times.w = in.cost[kW];
  times.comm.assign(in.comm.begin(), in.comm.end() - 1);

  std::optional<Schedule> best;
  double best_time = 0;
  auto consider = [&](Schedule candidate) {
    const double t = asap_makespan(candidate, times);
    if (!best || t < best_time) {
      best = std::move(candidate);
      best_time = t;
    }
  };
  for (const bool bubble_before_first_b : {true, false}) {
    for (const bool prioritize_b : {true, false}) {
      for (const bool fill_small_bubbles : {true, false}) {
        auto order = Greedy(in, {bubble_before_first_b, prioritize_b, fill_small_bubbles}).run();
        if (!order) continue;
        Schedule s = empty_schedule(spec, 1);
        s.ranks = std::move(*order);
        consider(std::move(s));
      }
    }
  }
  consider(limited_1f1b(spec, in));
  return std::move(*best);
}

}  // namespace pw
