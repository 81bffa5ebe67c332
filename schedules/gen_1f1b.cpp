#include <algorithm>

#include "schedules/families.hpp"

namespace pw {

// PipeDream-flush: rank r runs p - r - 1 warm-up forwards, then alternates one forward and one
// backward, then drains the backwards it still owes. Rank r thus holds at most min(p - r, m)
// micro-batches' activations.
Schedule make_1f1b(const ScheduleSpec& spec) {
  Schedule s = empty_schedule(spec, 1);
  const int p = spec.ranks, m = spec.microbatches;
  for (int r = 0; r < p; ++r) {
    auto& list = s.ranks[static_cast<size_t>(r)];
    const int warmup = std::min(p - r - 1, m);
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

}  // namespace pw
