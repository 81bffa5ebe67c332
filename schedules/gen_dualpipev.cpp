#include <algorithm>
#include <deque>
#include <map>
#include <utility>

#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

namespace {

// Issues one rank's actions with a running micro-batch counter per (stage, kind), as PyTorch's
// ScheduleDualPipeV does: a B queues its W, and a W pulls the oldest queued one. With two copies of the model
// (bidirectional DualPipe) the k-th micro-batch of a stage of copy c is 2k + c (Schedule::runs_on).
class RankWriter {
 public:
  // `copies` 2: stage s belongs to copy s / stages_per_copy.
  explicit RankWriter(std::vector<Action>& list, int copies = 1, int stages_per_copy = 1)
      : list_(list), copies_(copies), stages_per_copy_(stages_per_copy) {}

  void forward(int stage) { list_.push_back(Action{Op::F, stage, take(stage, Op::F)}); }
  void input_grad(int stage) {
    const int mb = take(stage, Op::B);
    list_.push_back(Action{Op::B, stage, mb});
    pending_w_.emplace_back(stage, mb);
  }
  void full_backward(int stage) { list_.push_back(Action{Op::BW, stage, take(stage, Op::B)}); }
  void backward(int stage, bool split) { split ? input_grad(stage) : full_backward(stage); }
  // Forward of `f_stage` overlapped with the full backward of `b_stage` (another micro-batch).
  void overlapped(int f_stage, int b_stage) {
    const int f_mb = take(f_stage, Op::F);
    const int b_mb = take(b_stage, Op::B);
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
  int copies_, stages_per_copy_;
  std::map<std::pair<int, Op>, int> counters_;
  std::deque<std::pair<int, int>> pending_w_;

  // The stage's next micro-batch of this kind: its k-th, numbered within the stage's copy.
  int take(int stage, Op kind) { return counters_[{stage, kind}]++ * copies_ + stage / stages_per_copy_ % copies_; }
};

// The eight steps of DualPipe.step on one rank, which DualPipeV runs too: `side` ranks on this rank's side of the
// pipeline (p for a V, p / 2 for bidirectional DualPipe), `k` this rank's place among them counted from its end
// (r, or min(r, p - 1 - r)), `main` pairs of composites in the main phase, `alone` whether its first forward runs
// alone before a full backward. Phase 0 is stage c0, phase 1 stage c1.
void dual_steps(RankWriter& out, int c0, int c1, int side, int k, int main, bool alone) {
  for (int i = 0; i < 2 * (side - k - 1); ++i) out.forward(c0);
  for (int i = 0; i < k + 1; ++i) {
    out.forward(c0);
    out.forward(c1);
  }
  for (int i = 0; i < side - k - 1; ++i) {
    out.input_grad(c1);
    out.weight_if_pending();
    out.forward(c1);
  }
  for (int i = 0; i < main; ++i) {
    if (i == 0 && alone) {
      out.forward(c0);
      out.full_backward(c1);
    } else {
      out.overlapped(c0, c1);
    }
    out.overlapped(c1, c0);
  }
  for (int i = 0; i < side - k - 1; ++i) {
    out.full_backward(c1);
    out.overlapped(c1, c0);
  }
  bool split = false;
  const int pairs = k + 1;
  for (int i = 0; i < pairs; ++i) {
    if (i == pairs / 2 && k % 2 == 1) split = true;
    out.backward(c1, split);
    if (i == pairs / 2 && k % 2 == 0) split = true;
    out.backward(c0, split);
  }
  for (int i = 0; i < side - k - 1; ++i) {
    out.weight_if_pending();
    out.backward(c0, split);
  }
  for (int i = 0; i < k + 1; ++i) out.weight_if_pending();
}

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
    // The last rank holds the turn of the V: its first chunk-1 backward needs the very forward before it, so
    // they cannot overlap.
    dual_steps(out, r, 2 * p - 1 - r, p, r, m - 2 * p + r + 1, r == p - 1);
  }
  return s;
}

// Bidirectional DualPipe (DeepSeek-V3 report, section 3.2.1; deepseek-ai/DualPipe dualpipe/dualpipe.py at
// 3da1bbe, DualPipe.step): two copies of the model, the first entering at rank 0 (stage r on rank r), the
// second at rank p - 1 (its part k on rank p - 1 - k: stage p + k, so the placement is the V one), half the
// micro-batches each. Rank r's phase 0 is the copy that enters on its own side of the middle (the first for
// r < p / 2), phase 1 the other; with h = min(r, p - 1 - r) and the p / 2 ranks of a side, the steps are
// DualPipeV's with p / 2 for p and h for r, and m / 2 - p + h + 1 pairs of composites in the main phase. On
// the two middle ranks the first forward of the main phase runs alone before a full backward, as DualPipe
// runs it ("to further reduce bubble size"). p and m even, m >= 2p (DualPipe's assertions).
Schedule make_dualpipe(const ScheduleSpec& spec) {
  const int p = spec.ranks, m = spec.microbatches;
  if (p % 2 != 0)
    throw_bad_input("--pp: dualpipe runs the two copies' halves on an even number of ranks, got {}; use --pp {} or "
                    "--schedule dualpipev",
                    p, p + 1);
  if (m % 2 != 0 || m < 2 * p)
    throw_bad_input("--microbatches: dualpipe needs an even count of at least 2 x --pp ({}), half for each copy, got {}; "
                    "use {}",
                    2 * p, m, std::max(2 * p, m + 1));
  Schedule s = empty_v_schedule(spec);
  s.copies = 2;
  const int half = p / 2;
  for (int r = 0; r < p; ++r) {
    RankWriter out(s.ranks[static_cast<size_t>(r)], 2, p);
    const int h = std::min(r, p - 1 - r);
    const bool first_half = r < half;
    const int c0 = first_half ? r : 2 * p - 1 - r, c1 = first_half ? 2 * p - 1 - r : r;
    dual_steps(out, c0, c1, half, h, m / 2 - p + h + 1, r == half - 1 || r == half);
  }
  return s;
}

}  // namespace pw
