#include "schedules/timing.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/overlapped_pair.hpp"
#include "schedules/parts.hpp"
#include "schedules/validate.hpp"

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
  if ((!t.comm_f.empty() || !t.comm_b.empty()) && (t.comm_f.size() != n || t.comm_b.size() != n))
    throw_bad_input("stage times: comm_f and comm_b need one time per stage ({}), got {} and {}", stages,
                    t.comm_f.size(), t.comm_b.size());
}

double duration(const Action& a, const StageTimes& t) {
  const auto s = static_cast<size_t>(a.stage);
  switch (a.op) {
    case Op::F: return t.f[s];
    case Op::B: return t.b[s];
    case Op::W: return t.w[s];
    case Op::BW: return t.b[s] + t.w[s];
    case Op::FB: {
      const auto s2 = static_cast<size_t>(a.stage2);
      double pair = !t.fb.empty() && t.fb[s] > 0 ? t.fb[s] : t.f[s] + t.b[s2] + t.w[s2];
      if (!t.comm_f.empty() && t.comm_f[s] + t.comm_b[s2] > 0)
        pair = std::min(pair, overlapped_pair_time(t.f[s], t.comm_f[s], t.b[s2] + t.w[s2], t.comm_b[s2]));
      return pair;
    }
    default: return 0;
  }
}

}  // namespace

ScheduleTiming asap_timing(const Schedule& s, const StageTimes& times) {
  const int stages = s.num_stages(), m = s.microbatches;
  check_sizes(times, stages);
  // Part end times, indexed (part, stage, micro-batch); negative until done.
  std::vector<double> done(static_cast<size_t>(3 * stages * m), -1.0);
  auto index = [&](const WorkPart& p) {
    return static_cast<size_t>((static_cast<int>(p.part) * stages + p.stage) * m + p.microbatch);
  };

  ScheduleTiming out;
  const size_t ranks = s.ranks.size();
  out.start.resize(ranks);
  out.end.resize(ranks);
  std::vector<size_t> next(ranks, 0);
  std::vector<double> free_at(ranks, 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < ranks; ++r) {
      const auto& list = s.ranks[r];
      while (next[r] < list.size()) {
        const Action& a = list[next[r]];
        double start = free_at[r];
        bool ready = true;
        if (is_compute(a.op)) {
          for (const Action& d : compute_dependencies(a, stages)) {
            const WorkPart part = parts_of(d).front();
            const double t = done[index(part)];
            if (t < 0) {
              ready = false;
              break;
            }
            // Only neighbours' tensors cross ranks: F(s-1) over boundary s-1, B(s+1) over boundary s.
            const bool remote = s.placement.rank_of(part.stage) != static_cast<int>(r);
            const int boundary = part.part == Part::F ? part.stage : part.stage - 1;
            const double delay = remote && !times.comm.empty() ? times.comm[static_cast<size_t>(boundary)] : 0.0;
            start = std::max(start, t + delay);
          }
        }
        if (!ready) break;
        const double finish = start + duration(a, times);
        for (const WorkPart& p : parts_of(a)) done[index(p)] = finish;
        out.start[r].push_back(start);
        out.end[r].push_back(finish);
        free_at[r] = finish;
        out.makespan = std::max(out.makespan, finish);
        ++next[r];
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    if (next[r] < s.ranks[r].size())
      throw_runtime("schedule {}: cannot be timed, rank {} waits forever at step {}: '{}'", s.name, r, next[r],
                    to_text(s.ranks[r][next[r]]));
  }
  return out;
}

double asap_makespan(const Schedule& s, const StageTimes& times) { return asap_timing(s, times).makespan; }

}  // namespace pw
