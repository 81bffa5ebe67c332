#include <algorithm>

#include "schedules/families.hpp"

namespace pw {

// ZB-V (Qi et al. 2023, section 6), in the order of PyTorch's ScheduleZBVZeroBubble. Rank r holds
// chunk 0 = stage r and chunk 1 = stage 2p - 1 - r, so a micro-batch goes down the ranks through
// chunk 0, turns on rank p - 1 and comes back up through chunk 1; its backward does the same in
// reverse. Per rank: 2(p - r) - 1 chunk-0 forwards; r pairs (chunk-1 F, chunk-0 F); p - r rounds of
// chunk-1 F, B, W; then the steady state (chunk-0 F, B, W, chunk-1 F, B, W); the cool-down runs the
// Bs first and leaves the Ws to fill the bubbles at the end. Like PyTorch it builds the order for
// max(m, 2p - 1) micro-batches and drops the ones beyond m, so any m works. With F = B = W per
// chunk the only idle time is the start-up of the chain; a rank holds at most 2p chunk-micro-batches,
// p micro-batches of its whole model part: 1F1B's worst rank.
Schedule make_zb_v(const ScheduleSpec& spec) {
  const int p = spec.ranks, m = spec.microbatches;
  const int padded = std::max(2 * p - 1, m);
  Schedule s = empty_v_schedule(spec);
  for (int r = 0; r < p; ++r) {
    auto& list = s.ranks[static_cast<size_t>(r)];
    const int c0 = r, c1 = 2 * p - 1 - r;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto emit = [&](Op op, int stage, int mb) {
      if (mb < m) list.push_back(Action{op, stage, mb});
    };
    for (int i = 0; i < 2 * (p - r) - 1; ++i) emit(Op::F, c0, f0++);
    for (int i = 0; i < r; ++i) {
      emit(Op::F, c1, f1++);
      emit(Op::F, c0, f0++);
    }
    for (int i = 0; i < p - r; ++i) {
      emit(Op::F, c1, f1++);
      emit(Op::B, c1, b1);
      emit(Op::W, c1, b1++);
    }
    while (f1 < f0 || f0 < padded) {
      if (f0 < padded) emit(Op::F, c0, f0++);
      emit(Op::B, c0, b0);
      emit(Op::W, c0, b0++);
      emit(Op::F, c1, f1++);
      emit(Op::B, c1, b1);
      emit(Op::W, c1, b1++);
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < r; ++i) {
      emit(Op::B, c0, b0++);
      emit(Op::B, c1, b1++);
    }
    for (int i = 0; i < p - r; ++i) {
      emit(Op::B, c0, b0++);
      emit(Op::W, c0, w0++);
    }
    while (w1 < b1) emit(Op::W, c1, w1++);
    while (w0 < b0) emit(Op::W, c0, w0++);
  }
  return s;
}

}  // namespace pw
