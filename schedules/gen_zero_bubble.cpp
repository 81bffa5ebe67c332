#include <algorithm>

#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

namespace {

struct RankState {
  int f = 0, b = 0, w = 0;        // actions of each kind issued so far
  std::vector<int> f_end, b_end;  // per micro-batch, the unit step its F / B ends (-1: not yet)
};

}  // namespace

// ZB-H1 and ZB-H2 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", section 3) as one generator
// with the knob k = max_pending, the most micro-batches whose W is still pending on a rank.
//
// The order is what a greedy list scheduler does with F = B = W = 1 and free communication, the
// setting the paper's handcrafted figures are drawn in: at each unit step a free rank runs, in this
// priority, the next F if its input has arrived, the rank holds fewer than a_r micro-batches before
// their B and fewer than c before their W; else the next B if its gradient has arrived; else the
// oldest pending W; else it idles. (F before B is 1F1B's steady-state order, which ZB-H1 keeps.)
//   a_r = min(2(p - r) - 1, k - r): 2(p - r) - 1 forwards are what rank r can run before its first B
//         can arrive (ZB-H2 fills all of that time); k - r keeps the W deferral of the later ranks
//         inside k (ZB-H1, k = p, gives 1F1B's p - r).
//   c   = min(k, 2p - 1): no rank ever needs more, so k = 2p - 1 and k = 2p give the same order.
// With k = p this is the paper's ZB-H1 figure (1F1B's order with W deferred r steps on rank r);
// with k = 2p its ZB-H2 figure: the warm-up fills the start with forwards and the cool-down with Ws.
// The paper's zero bubble for ZB-H2 assumes optimizer post-validation (the next iteration starts
// before this one's step); in one synchronised iteration the last rank still waits (p - 1)F for the
// first forward, so an iteration takes m(F + B + W) + (p - 1) max(F, F + B - 2W) (timing_test.cpp).
Schedule make_zero_bubble(const ScheduleSpec& spec) {
  const int p = spec.ranks, m = spec.microbatches;
  const int k = spec.max_pending != 0 ? spec.max_pending : spec.name == "zb-h1" ? p : 2 * p;
  if (k < p || k > 2 * p)
    throw_bad_input(
        "--max-pending: {} keeps from --pp ({}) to 2 x --pp ({}) backward passes pending, got {}; use a "
        "value in {}..{}",
        spec.name, p, 2 * p, k, p, 2 * p);
  Schedule s = empty_schedule(spec, 1);
  const int held_cap = std::min(k, 2 * p - 1);
  std::vector<RankState> st(static_cast<size_t>(p));
  for (auto& r : st) {
    r.f_end.assign(static_cast<size_t>(m), -1);
    r.b_end.assign(static_cast<size_t>(m), -1);
  }
  // Whether the pass that ends at `end` (-1: not run yet) is done at unit step t.
  auto done_by = [](const std::vector<int>& end, int mb, int t) {
    const int e = end[static_cast<size_t>(mb)];
    return e >= 0 && e <= t;
  };
  int finished = 0;
  // Every unit step some rank that still has work can run something; the bound only guards that.
  const int step_bound = 3 * m * p + 2 * p;
  for (int t = 0; finished < p; ++t) {
    if (t > step_bound)
      throw_runtime("{}: the greedy order did not finish within {} unit steps", spec.name, step_bound);
    for (int r = 0; r < p; ++r) {
      RankState& me = st[static_cast<size_t>(r)];
      if (me.w == m) continue;
      auto& list = s.ranks[static_cast<size_t>(r)];
      const int before_b_cap = std::min(2 * (p - r) - 1, k - r);
      const bool f_ready = me.f < m && (r == 0 || done_by(st[static_cast<size_t>(r - 1)].f_end, me.f, t)) &&
                           me.f - me.b < before_b_cap && me.f - me.w < held_cap;
      const bool b_ready = me.b < me.f && (r == p - 1 ? done_by(me.f_end, me.b, t)
                                                      : done_by(st[static_cast<size_t>(r + 1)].b_end, me.b, t));
      if (f_ready) {
        me.f_end[static_cast<size_t>(me.f)] = t + 1;
        list.push_back(Action{Op::F, r, me.f++});
      } else if (b_ready) {
        me.b_end[static_cast<size_t>(me.b)] = t + 1;
        list.push_back(Action{Op::B, r, me.b++});
      } else if (me.w < me.b) {
        list.push_back(Action{Op::W, r, me.w++});
        if (me.w == m) ++finished;
      }
    }
  }
  return s;
}

}  // namespace pw
