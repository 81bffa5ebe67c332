#include "schedules/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "core/error.hpp"
#include "schedules/parts.hpp"

namespace pw {

std::vector<Action> compute_dependencies(const Action& a, int stages_per_copy) {
  std::vector<Action> deps;
  auto add = [&](Action d) {
    if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
  };
  auto forward = [&](int s, int i) {
    if (s % stages_per_copy > 0) add(Action{Op::F, s - 1, i});
  };
  auto backward = [&](int s, int i) {
    add(Action{Op::F, s, i});
    if (s % stages_per_copy < stages_per_copy - 1) add(Action{Op::B, s + 1, i});
  };
  switch (a.op) {
    case Op::F: forward(a.stage, a.microbatch); break;
    case Op::B:
    case Op::BW: backward(a.stage, a.microbatch); break;
    case Op::W: add(Action{Op::B, a.stage, a.microbatch}); break;
    case Op::FB:
      forward(a.stage, a.microbatch);
      backward(a.stage2, a.microbatch2);
      break;
    case Op::SendF: add(Action{Op::F, a.stage, a.microbatch}); break;
    case Op::SendB: add(Action{Op::B, a.stage, a.microbatch}); break;
    case Op::RecvF:
    case Op::RecvB: break;
  }
  return deps;
}

namespace {

// What a validation error shows of the schedule's grid, at most.
constexpr int kGridRanks = 16;
constexpr int kGridSteps = 24;

struct Loc {
  int rank = -1;
  int step = -1;
  bool known() const { return rank >= 0; }
};

// A tensor that travels between two stages: the forward output of `stage` (to stage + 1) or the
// input gradient of `stage` (to stage - 1), for one micro-batch.
enum class Dir { F, B };

// The checks run in order (placement and ranges, counts, compute order, then communication) so
// that each one can rely on the ones before: e.g. the order check knows every part exists once.
class Validator {
 public:
  explicit Validator(const Schedule& s) : s_(s), stages_(s.num_stages()), m_(s.microbatches) {}

  void run() {
    check_structure();
    check_cells();
    check_counts();
    check_order(false);
    if (s_.lowered) {
      check_comm_matching();
      check_order(true);
    }
  }

 private:
  const Schedule& s_;
  int stages_;
  int m_;
  std::vector<Loc> producer_;  // per part: where it is computed
  std::vector<Loc> send_;      // per tensor
  std::vector<Loc> recv_;      // per tensor

  const Action& at(int r, int k) const { return s_.ranks[static_cast<size_t>(r)][static_cast<size_t>(k)]; }
  std::string cell(int r, int k) const { return to_text(at(r, k)); }
  int rank_of(int stage) const { return s_.placement.rank_of(stage); }
  int ranks() const { return static_cast<int>(s_.ranks.size()); }
  int length(int r) const { return static_cast<int>(s_.ranks[static_cast<size_t>(r)].size()); }

  size_t part_index(const WorkPart& p) const {
    return static_cast<size_t>((static_cast<int>(p.part) * stages_ + p.stage) * m_ + p.microbatch);
  }
  size_t tensor_index(Dir dir, int stage, int mb) const {
    return static_cast<size_t>((static_cast<int>(dir) * stages_ + stage) * m_ + mb);
  }
  // The tensor a communication action moves.
  size_t tensor_of(const Action& a) const {
    switch (a.op) {
      case Op::SendF: return tensor_index(Dir::F, a.stage, a.microbatch);
      case Op::RecvF: return tensor_index(Dir::F, a.stage - 1, a.microbatch);
      case Op::SendB: return tensor_index(Dir::B, a.stage, a.microbatch);
      default: return tensor_index(Dir::B, a.stage + 1, a.microbatch);  // RecvB
    }
  }
  // The other end of a communication action.
  static Action peer_of(const Action& a) {
    switch (a.op) {
      case Op::SendF: return Action{Op::RecvF, a.stage + 1, a.microbatch};
      case Op::RecvF: return Action{Op::SendF, a.stage - 1, a.microbatch};
      case Op::SendB: return Action{Op::RecvB, a.stage - 1, a.microbatch};
      default: return Action{Op::SendB, a.stage + 1, a.microbatch};  // RecvB
    }
  }

  [[noreturn]] void fail(const std::string& problem, const std::vector<GridCell>& marks = {}) const {
    // Around the fault: a whole schedule of a million actions would be megabytes on stderr.
    std::string grid = to_grid_around(s_, marks, kGridRanks, kGridSteps);
    if (!grid.empty() && grid.back() == '\n') grid.pop_back();
    throw Error(ErrorKind::BadInput, fmt::format("schedule {}: {}", s_.name, problem), grid);
  }
  [[noreturn]] void fail_at(const std::string& kind, int r, int k, const std::string& detail,
                            std::vector<GridCell> marks = {}) const {
    // The named cell first: the grid an error shows is centred on it.
    std::erase_if(marks, [&](const GridCell& c) { return c.rank == r && c.step == k; });
    marks.insert(marks.begin(), GridCell{r, k});
    fail(fmt::format("{} at rank {}, step {}: '{}' {}", kind, r, k, cell(r, k), detail), marks);
  }

  void check_structure() const {
    if (m_ < 1) fail(fmt::format("microbatches is {}; a schedule needs at least 1", m_));
    if (s_.placement.ranks != ranks())
      fail(fmt::format("the placement has {} ranks but the schedule lists {}", s_.placement.ranks, ranks()));
    if (stages_ < 1) fail("the placement lists no stages");
    if (s_.copies < 1 || s_.copies > stages_ || stages_ % s_.copies != 0)
      fail(fmt::format("{} copies of the model do not split its {} stages into pipelines of equal length", s_.copies,
                       stages_));
    if (m_ % s_.copies != 0)
      fail(fmt::format("{} micro-batches do not split evenly over {} copies of the model", m_, s_.copies));
    for (int st = 0; st < stages_; ++st) {
      if (rank_of(st) < 0 || rank_of(st) >= ranks())
        fail(fmt::format("the placement puts stage {} on rank {}, but there are {} ranks", st, rank_of(st), ranks()));
    }
  }

  void check_stage(int r, int k, int stage, int mb) const {
    if (stage < 0 || stage >= stages_) fail_at("stage out of range", r, k, fmt::format("(stages 0..{})", stages_ - 1));
    if (mb < 0 || mb >= m_) fail_at("micro-batch out of range", r, k, fmt::format("(micro-batches 0..{})", m_ - 1));
    if (rank_of(stage) != r)
      fail_at("wrong rank", r, k, fmt::format("(the placement puts stage {} on rank {})", stage, rank_of(stage)));
    if (!s_.runs_on(stage, mb))
      fail_at("wrong copy", r, k,
              fmt::format("(stage {} is in copy {} of the model, micro-batch {} runs on copy {})", stage,
                          s_.copy_of_stage(stage), mb, mb % s_.copies));
  }

  void check_cells() const {
    for (int r = 0; r < ranks(); ++r) {
      for (int k = 0; k < length(r); ++k) {
        const Action& a = at(r, k);
        if (is_compute(a.op)) {
          for (const WorkPart& p : parts_of(a)) check_stage(r, k, p.stage, p.microbatch);
          continue;
        }
        if (!s_.lowered)
          fail_at("communication in a compute-only schedule", r, k, "(lowered is false; lower() adds sends and receives)");
        check_stage(r, k, a.stage, a.microbatch);
        const Action peer = peer_of(a);
        const bool toward_next = a.op == Op::SendF || a.op == Op::RecvB;
        if (!(toward_next ? s_.has_next(a.stage) : s_.has_previous(a.stage)))
          fail_at("no peer stage", r, k,
                  fmt::format("(stage {} is the {} stage{})", a.stage, toward_next ? "last" : "first",
                              s_.copies > 1 ? fmt::format(" of copy {}", s_.copy_of_stage(a.stage)) : ""));
        if (rank_of(peer.stage) == r)
          fail_at("needless communication", r, k,
                  fmt::format("(stages {} and {} are both on rank {})", a.stage, peer.stage, r));
      }
    }
  }

  static const char* part_name(Part p) { return p == Part::F ? "F" : p == Part::B ? "backward" : "W"; }

  // Counts from the parts the lists hold, sorted, rather than from a table of every (part, stage,
  // micro-batch): a file naming micro-batch 999999999 would make that table 3 x 10^9 entries. Once every
  // part is there exactly once, the table is as long as the lists and the later checks use it.
  void check_counts() {
    struct Seen {
      WorkPart part;
      Loc at;
      size_t order;  // position in the scan of the lists
    };
    std::vector<Seen> seen;
    for (int r = 0; r < ranks(); ++r)
      for (int k = 0; k < length(r); ++k)
        for (const WorkPart& p : parts_of(at(r, k))) seen.push_back({p, Loc{r, k}, seen.size()});
    const auto key = [](const Seen& x) { return std::tuple(x.part.stage, x.part.microbatch, x.part.part, x.order); };
    std::sort(seen.begin(), seen.end(), [&](const Seen& a, const Seen& b) { return key(a) < key(b); });

    // The repeat met first in the scan is the one reported, as a scan would meet it.
    const Seen* repeat = nullptr;
    const Seen* first_of_repeat = nullptr;
    for (size_t i = 1; i < seen.size(); ++i) {
      // Within a part's run, sorted by scan order, the second entry is the part's first repeat.
      const bool second = seen[i].part == seen[i - 1].part && (i < 2 || !(seen[i - 2].part == seen[i].part));
      if (second && (!repeat || seen[i].order < repeat->order)) {
        repeat = &seen[i];
        first_of_repeat = &seen[i - 1];
      }
    }
    if (repeat) {
      const Loc first = first_of_repeat->at;
      const WorkPart& p = repeat->part;
      fail_at("duplicate", repeat->at.rank, repeat->at.step,
              fmt::format("(second {} of micro-batch {} on stage {}; the first is at rank {}, step {})", part_name(p.part),
                          p.microbatch, p.stage, first.rank, first.step),
              {{first.rank, first.step}, {repeat->at.rank, repeat->at.step}});
    }

    // Walk (stage, micro-batch) in order alongside the sorted parts: the first pair short of F, B and W.
    size_t i = 0;
    for (int st = 0; st < stages_; ++st) {
      for (int mb = s_.copy_of_stage(st); mb < m_; mb += s_.copies) {
        bool f = false, b = false, w = false;
        for (; i < seen.size() && seen[i].part.stage == st && seen[i].part.microbatch == mb; ++i) {
          f = f || seen[i].part.part == Part::F;
          b = b || seen[i].part.part == Part::B;
          w = w || seen[i].part.part == Part::W;
        }
        std::string what;
        if (!f) what = "no F";
        else if (!b && !w) what = "no backward";
        else if (!b) what = "W but no B";
        else if (!w) what = "B but no W";
        if (!what.empty())
          fail(fmt::format("missing action: stage {} (rank {}) has {} for micro-batch {}", st, rank_of(st), what, mb));
      }
    }
    // Indexed by (part, stage, micro-batch): with copies of the model each micro-batch skips the other copies'
    // stages, so the table is `copies` times as long as the lists.
    producer_.assign(seen.size() * static_cast<size_t>(s_.copies), Loc{});
    for (const Seen& x : seen) producer_[part_index(x.part)] = x.at;
  }

  void check_comm_matching() {
    const size_t tensors = static_cast<size_t>(2 * stages_ * m_);
    send_.assign(tensors, Loc{});
    recv_.assign(tensors, Loc{});
    for (int r = 0; r < ranks(); ++r) {
      for (int k = 0; k < length(r); ++k) {
        const Action& a = at(r, k);
        if (is_compute(a.op)) continue;
        Loc& first = (a.op == Op::SendF || a.op == Op::SendB ? send_ : recv_)[tensor_of(a)];
        if (first.known())
          fail_at("duplicate", r, k, fmt::format("(the same tensor is already moved at step {})", first.step),
                  {{first.rank, first.step}, {r, k}});
        first = Loc{r, k};
      }
    }
    for (int r = 0; r < ranks(); ++r) {
      for (int k = 0; k < length(r); ++k) {
        const Action& a = at(r, k);
        if (is_compute(a.op)) continue;
        const bool is_send = a.op == Op::SendF || a.op == Op::SendB;
        if ((is_send ? recv_ : send_)[tensor_of(a)].known()) continue;
        const Action peer = peer_of(a);
        fail_at(is_send ? "unmatched send" : "unmatched receive", r, k,
                fmt::format("(no '{}' on rank {})", to_text(peer), rank_of(peer.stage)));
      }
    }
    // Every tensor that crosses ranks needs its pair; one that is missing both ends is still a hole.
    for (int st = 0; st < stages_; ++st) {
      for (int i = s_.copy_of_stage(st); i < m_; i += s_.copies) {
        for (const Dir dir : {Dir::F, Dir::B}) {
          const int to = dir == Dir::F ? st + 1 : st - 1;
          if (!(dir == Dir::F ? s_.has_next(st) : s_.has_previous(st)) || rank_of(to) == rank_of(st) ||
              send_[tensor_index(dir, st, i)].known())
            continue;
          const Loc from = producer_[part_index({dir == Dir::F ? Part::F : Part::B, st, i})];
          const Action send{dir == Dir::F ? Op::SendF : Op::SendB, st, i};
          fail_at("missing communication", from.rank, from.step,
                  fmt::format("(its output goes to stage {} on rank {}, but no '{}' and '{}' carry it)", to,
                              rank_of(to), to_text(send), to_text(peer_of(send))));
        }
      }
    }
  }

  // Runs every rank's list in order, an action starting once what it needs is done. Compute-only
  // (lowered == false): a dependency is done when its part is computed, wherever. With
  // communication: a part from another rank is usable once its receive here has completed, a
  // receive completes once its send has been issued, and sends never block.
  void check_order(bool with_comm) {
    std::vector<char> part_done(producer_.size(), 0), sent(send_.size(), 0), received(recv_.size(), 0);
    std::vector<int> next(static_cast<size_t>(ranks()), 0);

    // What the action at (r, k) still waits for: the location of the first missing thing.
    auto blocker = [&](int r, int k) -> std::optional<Loc> {
      const Action& a = at(r, k);
      if (is_comm(a.op)) {
        if (!with_comm) return std::nullopt;
        if (a.op == Op::RecvF || a.op == Op::RecvB) {
          if (!sent[tensor_of(a)]) return send_[tensor_of(a)];
          return std::nullopt;
        }
      }
      for (const Action& d : compute_dependencies(a, s_.stages_per_copy())) {
        const WorkPart part = parts_of(d).front();
        if (with_comm && is_compute(a.op) && rank_of(part.stage) != r) {
          const Dir dir = part.part == Part::F ? Dir::F : Dir::B;
          const size_t t = tensor_index(dir, part.stage, part.microbatch);
          if (!received[t]) return recv_[t];
        } else if (!part_done[part_index(part)]) {
          return producer_[part_index(part)];
        }
      }
      return std::nullopt;
    };
    auto finish = [&](const Action& a) {
      if (is_compute(a.op)) {
        for (const WorkPart& p : parts_of(a)) part_done[part_index(p)] = 1;
      } else if (with_comm) {
        (a.op == Op::SendF || a.op == Op::SendB ? sent : received)[tensor_of(a)] = 1;
      }
    };

    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < ranks(); ++r) {
        int& k = next[static_cast<size_t>(r)];
        while (k < length(r) && !blocker(r, k)) {
          finish(at(r, k++));
          progress = true;
        }
      }
    }

    std::vector<GridCell> stuck;
    for (int r = 0; r < ranks(); ++r)
      if (next[static_cast<size_t>(r)] < length(r)) stuck.push_back({r, next[static_cast<size_t>(r)]});
    if (stuck.empty()) return;

    // A cell that waits for something later in its own list is the plainest error; report that first.
    for (const GridCell& c : stuck) {
      const Loc b = *blocker(c.rank, c.step);
      if (b.rank != c.rank) continue;
      if (b.step == c.step)
        fail_at("out of order", c.rank, c.step, "(one half of the composite needs the other)", stuck);
      fail_at("out of order", c.rank, c.step,
              fmt::format("comes before its dependency '{}' (step {})", cell(b.rank, b.step), b.step), stuck);
    }
    const GridCell c = stuck.front();
    const Loc b = *blocker(c.rank, c.step);
    const int blocked_at = next[static_cast<size_t>(b.rank)];
    fail_at(with_comm ? "deadlock" : "out of order", c.rank, c.step,
            fmt::format("waits for '{}' on rank {} (step {}), which is blocked at step {}: '{}'", cell(b.rank, b.step),
                        b.rank, b.step, blocked_at, cell(b.rank, blocked_at)),
            stuck);
  }
};

}  // namespace

void validate(const Schedule& s) { Validator(s).run(); }

}  // namespace pw
