#include <deque>
#include <map>
#include <utility>

#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

namespace {

// Issues one rank's actions with a running micro-batch counter per (stage, kind), as PyTorch's
// ScheduleDualPipeV does: a B queues its W, and a W pulls the oldest queued one.
class RankWriter {
 public:
  explicit RankWriter(std::vector<Action>& list) : list_(list) {}

  void forward(int stage) { list_.push_back(Action{Op::F, stage, next(stage, Op::F)++}); }
  void input_grad(int stage) {
    const int mb = next(stage, Op::B)++;
    list_.push_back(Action{Op::B, stage, mb});
    pending_w_.emplace_back(stage, mb);
  }
  void full_backward(int stage) { list_.push_back(Action{Op::BW, stage, next(stage, Op::B)++}); }
  void backward(int stage, bool split) { split ? input_grad(stage) : full_backward(stage); }
  // Forward of `f_stage` overlapped with the full backward of `b_stage` (another micro-batch).
  void overlapped(int f_stage, int b_stage) {
    const int f_mb = next(f_stage, Op::F)++;
    const int b_mb = next(b_stage, Op::B)++;
    list_.push_back(Action{Op::FB, f_stage, f_mb, b_stage, b_mb});
  }
  void weight_if_pending() {
    if (pending_w_.empty()) return;
    const auto [stage, mb] = pending_w_.front();
    pending_w_.pop_front();
    list_.push_back(Action{Op::W, stage, mb});
  }

 private:
  std::vector<Action>& list_;
  std::map<std::pair<int, Op>, int> counters_;
  std::deque<std::pair<int, int>> pending_w_;

  int& next(int stage, Op kind) { return counters_[{stage, kind}]; }
};

}  // namespace

// DualPipeV (DeepSeek-V3 report, 2024, and deepseek-ai/DualPipe; the order of PyTorch's
// ScheduleDualPipeV). V placement: rank r holds stage r (chunk 0) and stage 2p - 1 - r (chunk 1).
// Per rank: 2(p - r - 1) chunk-0 forwards; r + 1 pairs of forwards (chunk 0, chunk 1); p - r - 1
// zero-bubble rounds (chunk-1 B, a pending W, chunk-1 F); then the main phase of m - 2p + r + 1
// pairs of F&B composites (chunk-0 F with chunk-1 backward, chunk-1 F with chunk-0 backward), where
// one micro-batch's forward hides the other's backward communication; then the drain: p - r - 1
// rounds of chunk-1 backward and a composite, r + 1 pairs of backwards (splitting B and W from the
// middle on), and the pending Ws last. The main phase needs m >= 2p.
Schedule make_dualpipev(const ScheduleSpec& spec) {
  const int p = spec.ranks, m = spec.microbatches;
  if (m < 2 * p)
    throw_bad_input("--microbatches: dualpipev needs at least 2 x --pp ({}) micro-batches, got {}; use {} or more",
                    2 * p, m, 2 * p);
  Schedule s = empty_v_schedule(spec);
  for (int r = 0; r < p; ++r) {
    RankWriter out(s.ranks[static_cast<size_t>(r)]);
    const int c0 = r, c1 = 2 * p - 1 - r;
    for (int i = 0; i < 2 * (p - r - 1); ++i) out.forward(c0);
    for (int i = 0; i < r + 1; ++i) {
      out.forward(c0);
      out.forward(c1);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      out.input_grad(c1);
      out.weight_if_pending();
      out.forward(c1);
    }
    for (int i = 0; i < m - 2 * p + r + 1; ++i) {
      if (i == 0 && r == p - 1) {
        // The turn of the V: the chunk-1 backward needs this very forward's output, so they cannot overlap.
        out.forward(c0);
        out.full_backward(c1);
      } else {
        out.overlapped(c0, c1);
      }
      out.overlapped(c1, c0);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      out.full_backward(c1);
      out.overlapped(c1, c0);
    }
    bool split = false;
    const int pairs = r + 1;
    for (int i = 0; i < pairs; ++i) {
      if (i == pairs / 2 && r % 2 == 1) split = true;
      out.backward(c1, split);
      if (i == pairs / 2 && r % 2 == 0) split = true;
      out.backward(c0, split);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      out.weight_if_pending();
      out.backward(c0, split);
    }
    for (int i = 0; i < r + 1; ++i) out.weight_if_pending();
  }
  return s;
}

}  // namespace pw
