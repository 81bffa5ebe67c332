#include <algorithm>

#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

// ZB-H1 (Qi et al. 2023; PyTorch's ScheduleInterleavedZeroBubble with one chunk per rank): the
// 1F1B order with the backward split into B and W. Rank r runs p - r - 1 warm-up forwards, then
// F, B pairs; from its (r + 1)-th backward on each B is followed by the oldest W still owed, and
// the r W's left over close the iteration. Deferring W on later ranks lets the B chain run back
// to rank 0 without waiting, so each rank idles (p - 1)(F + B - W) instead of (p - 1)(F + B + W),
// while no rank holds more than p micro-batches whose W is still pending.
Schedule make_zb_h1(const ScheduleSpec& spec) {
  const int p = spec.ranks, m = spec.microbatches;
  if (spec.max_pending != 0 && spec.max_pending != p)
    throw_bad_input("--max-pending: zb-h1 keeps at most --pp ({}) backward passes pending; omit it or use {}", p, p);
  Schedule s = empty_schedule(spec, 1);
  for (int r = 0; r < p; ++r) {
    auto& list = s.ranks[static_cast<size_t>(r)];
    const int warmup = std::min(p - r - 1, m);
    int next_f = 0, next_b = 0, next_w = 0;
    auto backward = [&] {
      list.push_back(Action{Op::B, r, next_b++});
      if (next_b > r) list.push_back(Action{Op::W, r, next_w++});
    };
    while (next_f < warmup) list.push_back(Action{Op::F, r, next_f++});
    while (next_f < m) {
      list.push_back(Action{Op::F, r, next_f++});
      backward();
    }
    while (next_b < m) backward();
    while (next_w < m) list.push_back(Action{Op::W, r, next_w++});
  }
  return s;
}

}  // namespace pw
