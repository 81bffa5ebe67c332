#include "schedules/timing.hpp"

#include <algorithm>
#include <array>

#include "core/error.hpp"
#include "core/overlapped_pair.hpp"
#include "schedules/parts.hpp"

namespace pw {

StageTimes StageTimes::uniform(int stages, double f, double b, double w) {
  StageTimes t;
  t.f.assign(static_cast<size_t>(stages), f);
  t.b.assign(static_cast<size_t>(stages), b);
  t.w.assign(static_cast<size_t>(stages), w);
  return t;
}

namespace {

void check_sizes(const StageTimes& t, int stages) {
  const auto n = static_cast<size_t>(stages);
  if (t.f.size() != n || t.b.size() != n || t.w.size() != n)
    throw_bad_input("stage times: need one F, B and W time per stage ({}), got {}, {} and {}", stages, t.f.size(),
                    t.b.size(), t.w.size());
  if (!t.comm.empty() && t.comm.size() != n - 1)
    throw_bad_input("stage times: comm needs one time per stage boundary ({}), got {}", stages - 1, t.comm.size());
  if (!t.fb.empty() && t.fb.size() != n)
    throw_bad_input("stage times: fb needs one time per stage ({}), got {}", stages, t.fb.size());
  if (!t.bw_saving.empty() && t.bw_saving.size() != n)
    throw_bad_input("stage times: bw_saving needs one time per stage ({}), got {}", stages, t.bw_saving.size());
  if ((!t.comm_f.empty() || !t.comm_b.empty()) && (t.comm_f.size() != n || t.comm_b.size() != n))
    throw_bad_input("stage times: comm_f and comm_b need one time per stage ({}), got {} and {}", stages,
                    t.comm_f.size(), t.comm_b.size());
  if ((!t.host_f.empty() || !t.host_b.empty()) && (t.host_f.size() != n || t.host_b.size() != n))
    throw_bad_input("stage times: host_f and host_b need one time per stage ({}), got {} and {}", stages,
                    t.host_f.size(), t.host_b.size());
}

// A full backward of stage s: b + w less what running them as one pass saves.
double full_backward(const StageTimes& t, size_t s) {
  return t.b[s] + t.w[s] - (t.bw_saving.empty() ? 0.0 : t.bw_saving[s]);
}

double duration(const Action& a, const StageTimes& t) {
  const auto s = static_cast<size_t>(a.stage);
  switch (a.op) {
    case Op::F: return t.f[s];
    case Op::B: return t.b[s];
    case Op::W: return t.w[s];
    case Op::BW: return full_backward(t, s);
    case Op::FB: {
      const auto s2 = static_cast<size_t>(a.stage2);
      double pair = !t.fb.empty() && t.fb[s] > 0 ? t.fb[s] : t.f[s] + full_backward(t, s2);
      if (!t.comm_f.empty() && t.comm_f[s] + t.comm_b[s2] > 0)
        pair = std::min(pair, overlapped_pair_time(t.f[s], t.comm_f[s], full_backward(t, s2), t.comm_b[s2],
                                                     t.all_to_all_sm_share));
      // One host thread issues both halves.
      return t.host_f.empty() ? pair : std::max(pair, t.host_f[s] + t.host_b[s2]);
    }
    default: return 0;
  }
}

// What one compute action waits for and completes, as indices into the part table, with the transfer delay
// of each input: compute_dependencies and parts_of, without their allocations (asap_timing runs inside the
// configuration search for every candidate).
struct Needs {
  std::array<size_t, 3> wait{};
  std::array<double, 3> delay{};
  int waits = 0;
  std::array<size_t, 3> make{};
  int makes = 0;
};

}  // namespace

// Every action's rank, list position, start and end go to `on_action` as they are timed (asap_makespan keeps
// none: zb-auto times nine orders per schedule; the search's bound keeps each stage's last gradient); the
// makespan is returned.
template <typename OnAction>
static double timed(const Schedule& s, const StageTimes& times, OnAction on_action) {
  const int stages = s.num_stages(), m = s.microbatches;
  check_sizes(times, stages);
  // Part end times, indexed (part, stage, micro-batch); negative until done.
  std::vector<double> done(static_cast<size_t>(3 * stages * m), -1.0);
  auto index = [&](Part part, int stage, int mb) {
    return static_cast<size_t>((static_cast<int>(part) * stages + stage) * m + mb);
  };

  double makespan = 0;
  const size_t ranks = s.ranks.size();
  std::vector<size_t> next(ranks, 0);
  std::vector<double> free_at(ranks, 0.0);
  auto needs_of = [&](const Action& a, int r) {
    Needs n;
    // Only neighbours' tensors cross ranks: F(s-1) over boundary s-1, B(s+1) over boundary s.
    auto wait = [&](Part part, int stage, int mb) {
      const size_t i = index(part, stage, mb);
      for (int k = 0; k < n.waits; ++k)
        if (n.wait[static_cast<size_t>(k)] == i) return;
      const bool remote = s.placement.rank_of(stage) != r;
      const int boundary = part == Part::F ? stage : stage - 1;
      n.wait[static_cast<size_t>(n.waits)] = i;
      n.delay[static_cast<size_t>(n.waits)] = remote && !times.comm.empty() ? times.comm[static_cast<size_t>(boundary)] : 0.0;
      ++n.waits;
    };
    auto forward = [&](int st, int mb) {
      if (s.has_previous(st)) wait(Part::F, st - 1, mb);
    };
    auto backward = [&](int st, int mb) {
      wait(Part::F, st, mb);
      if (s.has_next(st)) wait(Part::B, st + 1, mb);
    };
    auto make = [&](Part part, int stage, int mb) { n.make[static_cast<size_t>(n.makes++)] = index(part, stage, mb); };
    switch (a.op) {
      case Op::F:
        forward(a.stage, a.microbatch);
        make(Part::F, a.stage, a.microbatch);
        break;
      case Op::B:
        backward(a.stage, a.microbatch);
        make(Part::B, a.stage, a.microbatch);
        break;
      case Op::BW:
        backward(a.stage, a.microbatch);
        make(Part::B, a.stage, a.microbatch);
        make(Part::W, a.stage, a.microbatch);
        break;
      case Op::W:
        wait(Part::B, a.stage, a.microbatch);
        make(Part::W, a.stage, a.microbatch);
        break;
      case Op::FB:
        forward(a.stage, a.microbatch);
        backward(a.stage2, a.microbatch2);
        make(Part::F, a.stage, a.microbatch);
        make(Part::B, a.stage2, a.microbatch2);
        make(Part::W, a.stage2, a.microbatch2);
        break;
      default: break;
    }
    return n;
  };
  // Each rank's next action's needs, kept while it waits (the loop below revisits waiting ranks).
  std::vector<Needs> waiting(ranks);
  std::vector<char> known(ranks, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < ranks; ++r) {
      const auto& list = s.ranks[r];
      while (next[r] < list.size()) {
        const Action& a = list[next[r]];
        double start = free_at[r];
        bool ready = true;
        if (!known[r]) {
          waiting[r] = needs_of(a, static_cast<int>(r));
          known[r] = 1;
        }
        const Needs& n = waiting[r];
        for (int k = 0; k < n.waits && ready; ++k) {
          const double t = done[n.wait[static_cast<size_t>(k)]];
          if (t < 0) ready = false;
          else start = std::max(start, t + n.delay[static_cast<size_t>(k)]);
        }
        if (!ready) break;
        const double finish = start + duration(a, times);
        for (int k = 0; k < n.makes; ++k) done[n.make[static_cast<size_t>(k)]] = finish;
        on_action(r, next[r], start, finish);
        free_at[r] = finish;
        makespan = std::max(makespan, finish);
        ++next[r];
        known[r] = 0;
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    if (next[r] < s.ranks[r].size())
      throw_runtime("schedule {}: cannot be timed, rank {} waits forever at step {}: '{}'", s.name, r, next[r],
                    to_text(s.ranks[r][next[r]]));
  }
  return makespan;
}

ScheduleTiming asap_timing(const Schedule& s, const StageTimes& times) {
  ScheduleTiming out;
  out.start.resize(s.ranks.size());
  out.end.resize(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    out.start[r].reserve(s.ranks[r].size());
    out.end[r].reserve(s.ranks[r].size());
  }
  out.makespan = timed(s, times, [&](size_t r, size_t, double start, double end) {
    out.start[r].push_back(start);
    out.end[r].push_back(end);
  });
  return out;
}

double asap_makespan(const Schedule& s, const StageTimes& times) {
  return timed(s, times, [](size_t, size_t, double, double) {});
}

GradientTiming asap_gradient_timing(const Schedule& s, const StageTimes& times) {
  GradientTiming out;
  out.start.assign(static_cast<size_t>(s.num_stages()), 0.0);
  out.end.assign(static_cast<size_t>(s.num_stages()), 0.0);
  out.makespan = timed(s, times, [&](size_t r, size_t i, double start, double end) {
    const Action& a = s.ranks[r][i];
    const int stage = a.op == Op::W || a.op == Op::BW ? a.stage : a.op == Op::FB ? a.stage2 : -1;
    // A stage's gradient actions run on its rank in list order, the order they are timed in.
    if (stage >= 0 && end >= out.end[static_cast<size_t>(stage)]) {
      out.end[static_cast<size_t>(stage)] = end;
      out.start[static_cast<size_t>(stage)] = start;
    }
  });
  return out;
}

}  // namespace pw
