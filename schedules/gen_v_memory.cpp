#include <algorithm>
#include <array>
#include <limits>

#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

// The controllable-memory V schedules (Qi et al. 2024, "Pipeline Parallelism with Controllable
// Memory"; the construction of the sail-sg zero-bubble repository's vhalf/vmin scheduler).
//
// A "building block" gives, for one micro-batch on rank i, the unit-time slots of its four passes:
// F (chunk 0 forward), f (chunk 1 forward), B (chunk 1 backward) and b (chunk 0 backward). Repeating
// the block every 6 slots (each rank does F f B b and two Ws per micro-batch) gives the steady
// state; the block's lifespan (F to b) sets how many micro-batches a rank holds, hence its memory:
//   V-Min:  F = i, f = 2p - i - 1, B = 2p + g + i, b = 4p + g - i - 1, g = 2 when 3 | p (else 0)
//   V-Half: F = 2i, f = 3p - i - 2, B = 3p + g + 2i - 1, b = 6p + g - i - 2, g = 3 when p is even
// (g shifts the backward half so that no two passes of a rank share a slot modulo 6). Then:
//   1. Ws go into the free slots, oldest first;
//   2. the warm-up and cool-down are squeezed: each pass, in slot order, moves to the earliest free
//      slot after its dependencies where the rank's peak memory does not grow; the slots are then
//      re-packed by a unit-time eager run;
//   3. the same again without the Ws, for the cool-down only;
//   4. Ws go back into the free slots, chunk 1's before chunk 0's.
// The order of each rank's slots is the schedule.
namespace {

// Pass kinds of one rank: chunk-0 forward (F), chunk-1 forward (f), chunk-1 backward (B), chunk-0
// backward (b), then the Ws: one list of all of them, or chunk 1's and chunk 0's apart.
constexpr int kF0 = 0, kF1 = 1, kB1 = 2, kB0 = 3, kW1 = 4, kW0 = 5;

using Lists = std::vector<std::vector<int>>;  // per pass kind, per micro-batch: a slot
using Ranks = std::vector<Lists>;

int& slot_of(Ranks& ranks, int rank, int kind, int mb) {
  return ranks[static_cast<size_t>(rank)][static_cast<size_t>(kind)][static_cast<size_t>(mb)];
}

int last_slot(const Lists& lists) {
  int bound = 0;
  for (const auto& l : lists) bound = std::max(bound, l.back());
  return bound;
}

// The earliest unconsumed (slot, kind) of the first `kinds` lists.
using Cursor = std::array<size_t, 6>;  // per pass kind, the next micro-batch (no allocation: this is hot)

std::pair<int, int> next_pass(const Lists& lists, const Cursor& at, int kinds) {
  std::pair<int, int> best{std::numeric_limits<int>::max(), -1};
  for (size_t t = 0; t < static_cast<size_t>(kinds); ++t)
    if (at[t] < lists[t].size()) best = std::min(best, {lists[t][at[t]], static_cast<int>(t)});
  return best;
}

// Steps 1 and 4: a W for every B or b, in the free slots, then after the last pass; `split` keeps
// chunk 1's Ws (list kW1) apart from chunk 0's (list kW0) and runs chunk 1's first.
Lists put_w(Lists lists, bool split) {
  const int bound = last_slot(lists);
  lists.resize(split ? 6 : 5);
  std::array<int, 2> owed{0, 0};
  Cursor at{};
  auto place = [&](int slot) {
    for (size_t w = 0; w < 2; ++w) {
      if (owed[w] == 0) continue;
      lists[kW1 + w].push_back(slot);
      --owed[w];
      return true;
    }
    return false;
  };
  for (int slot = 0; slot <= bound; ++slot) {
    const auto [time, kind] = next_pass(lists, at, 4);
    if (time != slot) {
      place(slot);
      continue;
    }
    ++at[static_cast<size_t>(kind)];
    if (kind == kB1 || kind == kB0) ++owed[split && kind == kB0 ? 1 : 0];
  }
  for (int slot = bound + 1; place(slot); ++slot) {
  }
  return lists;
}

// The memory walk of one rank, in chunk micro-batches: F and f allocate one each, a W frees one; without
// W lists, each free slot runs an owed W.
struct Walk {
  bool has_w = false;
  Cursor at{};
  int owed = 0, held = 0;

  // Runs slot `slot` (the earliest unconsumed pass sits there, or the slot is free).
  void step(const Lists& lists, int slot) {
    const auto [time, kind] = next_pass(lists, at, static_cast<int>(lists.size()));
    if (time == slot) {
      ++at[static_cast<size_t>(kind)];
      if (kind == kF0 || kind == kF1) ++held;
      if (kind == kW1) --held;
      if (kind == kB1 || kind == kB0) ++owed;
    } else if (!has_w && owed > 0) {
      --held;
      --owed;
    }
  }
};

// One rank's walk kept slot by slot, so that moving one pass earlier is judged by walking only from its new
// slot until the walk meets the kept one again (the squeeze tries many slots for every pass; walking the
// whole rank each time made it quadratic in the micro-batches). The rank's peak is within the squeeze's
// limit throughout, so only what follows the new slot can break it.
class RankMemory {
 public:
  explicit RankMemory(const Lists& lists) { rebuild(lists); }

  // The rank's peak, as built (accept() leaves the maxima before a move's slot stale).
  int built_peak() const { return from_.front(); }

  void rebuild(const Lists& lists) {
    const int bound = last_slot(lists);
    held_.assign(static_cast<size_t>(bound) + 2, 0);
    owed_ = held_;
    from_ = held_;
    Walk walk;
    walk.has_w = lists.size() > 4;
    for (int slot = 0; slot <= bound; ++slot) {
      held_[static_cast<size_t>(slot)] = walk.held;
      owed_[static_cast<size_t>(slot)] = walk.owed;
      walk.step(lists, slot);
      from_[static_cast<size_t>(slot)] = walk.held;  // after the slot; turned into suffix maxima below
    }
    held_.back() = walk.held;
    owed_.back() = walk.owed;
    from_.back() = 0;
    for (int slot = bound; slot >= 0; --slot)
      from_[static_cast<size_t>(slot)] = std::max(from_[static_cast<size_t>(slot)], from_[static_cast<size_t>(slot) + 1]);
  }

  // Whether the rank's peak stays within `limit` with `lists`, which equal the kept ones but for one pass
  // moved from slot `old_slot` to the earlier `new_slot`. Remembers the walk for accept().
  bool within(const Lists& lists, int new_slot, int old_slot, int limit) {
    const int kept_bound = static_cast<int>(held_.size()) - 2;
    Walk walk;
    walk.has_w = lists.size() > 4;
    walk.held = held_[static_cast<size_t>(new_slot)];
    walk.owed = owed_[static_cast<size_t>(new_slot)];
    for (size_t t = 0; t < lists.size(); ++t)
      walk.at[t] = static_cast<size_t>(std::lower_bound(lists[t].begin(), lists[t].end(), new_slot) - lists[t].begin());
    trial_start_ = new_slot;
    trial_.clear();
    met_ = -1;
    for (int slot = new_slot, bound = last_slot(lists); slot <= bound; ++slot) {
      // Past the old slot both walks have run the same passes: once their counts agree, so does the rest.
      if (slot > old_slot && slot <= kept_bound && walk.held == held_[static_cast<size_t>(slot)] &&
          walk.owed == owed_[static_cast<size_t>(slot)]) {
        met_ = slot;
        return from_[static_cast<size_t>(slot)] <= limit;
      }
      const int held = walk.held, owed = walk.owed;
      walk.step(lists, slot);
      trial_.push_back({held, owed, walk.held});
      if (walk.held > limit) return false;
    }
    return true;
  }

  // The move within() judged last is made: its walk replaces the kept one up to where they met. The suffix
  // maxima before the new slot go stale; the squeeze visits passes in slot order and never asks for them.
  void accept(const Lists& lists) {
    if (met_ < 0) {
      rebuild(lists);
      return;
    }
    for (size_t k = 0; k < trial_.size(); ++k) {
      const size_t slot = static_cast<size_t>(trial_start_) + k;
      held_[slot] = trial_[k][0];
      owed_[slot] = trial_[k][1];
    }
    for (size_t k = trial_.size(); k-- > 0;) {
      const size_t slot = static_cast<size_t>(trial_start_) + k;
      from_[slot] = std::max(trial_[k][2], from_[slot + 1]);
    }
  }

 private:
  // Per slot: the counts before it runs and the peak from it on.
  std::vector<int> held_, owed_, from_;
  int trial_start_ = 0, met_ = -1;
  std::vector<std::array<int, 3>> trial_;  // per slot from trial_start_: counts before, held after
};

struct Pass {
  int slot, rank, kind, mb;
};

// Visits every pass of every rank in (slot, rank, kind, micro-batch) order; `visit` may move the
// visited pass to another slot, never one not yet visited. The unvisited passes keep their slots, so the
// order is the one they stand in before the walk: a counting sort by slot, stable in the (rank, kind,
// micro-batch) order it is filled in (a heap merge of the lists was half of a V schedule's generation). Every
// list is in slot order, a pass after its previous micro-batch's: the blocks repeat every 6 slots, and the
// squeeze and the eager run keep each pass after what it needs, its previous micro-batch included.
template <typename Visit>
void in_slot_order(Ranks& ranks, Visit visit) {
  int bound = -1;
  size_t passes = 0;
  for (const Lists& r : ranks)
    for (const std::vector<int>& list : r) {
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i] < 0 || (i > 0 && list[i] <= list[i - 1]))
          throw_runtime("v schedule: a pass list is not in slot order at micro-batch {}", i);
        bound = std::max(bound, list[i]);
      }
      passes += list.size();
    }
  std::vector<size_t> start(static_cast<size_t>(bound) + 2, 0);
  for (const Lists& r : ranks)
    for (const std::vector<int>& list : r)
      for (int slot : list) ++start[static_cast<size_t>(slot) + 1];
  for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  std::vector<Pass> order(passes);
  for (size_t r = 0; r < ranks.size(); ++r)
    for (size_t t = 0; t < ranks[r].size(); ++t)
      for (size_t mb = 0; mb < ranks[r][t].size(); ++mb) {
        const int slot = ranks[r][t][mb];
        order[start[static_cast<size_t>(slot)]++] = Pass{slot, static_cast<int>(r), static_cast<int>(t), static_cast<int>(mb)};
      }
  for (const Pass& x : order) visit(x);
}

// The latest slot among what a pass needs first: the previous rank's pass of the same kind for F
// and B (they travel down the ranks), the next rank's for f and b (up), the rank's previous kind of
// the same micro-batch (F, f, B, b follow one another), its previous micro-batch; for the mb-th W,
// the rank's mb-th backward of either chunk. -1 when it needs nothing.
int needs_until(Ranks& ranks, const Pass& x) {
  const int p = static_cast<int>(ranks.size());
  int after = -1;
  if ((x.kind == kF0 || x.kind == kB1) && x.rank > 0) after = std::max(after, slot_of(ranks, x.rank - 1, x.kind, x.mb));
  if ((x.kind == kF1 || x.kind == kB0) && x.rank + 1 < p)
    after = std::max(after, slot_of(ranks, x.rank + 1, x.kind, x.mb));
  if (x.kind > kF0 && x.kind < kW1) after = std::max(after, slot_of(ranks, x.rank, x.kind - 1, x.mb));
  if (x.kind == kW1) {
    // The mb-th smallest slot of the two backward lists, each in micro-batch order and so sorted: a merge
    // walk, no copy (this runs for every W the squeeze visits).
    const std::vector<int>& b1 = ranks[static_cast<size_t>(x.rank)][kB1];
    const std::vector<int>& b0 = ranks[static_cast<size_t>(x.rank)][kB0];
    size_t i = 0, j = 0;
    int nth = -1;
    for (int k = 0; k <= x.mb; ++k) nth = (j >= b0.size() || (i < b1.size() && b1[i] <= b0[j])) ? b1[i++] : b0[j++];
    after = std::max(after, nth);
  }
  if (x.mb > 0) after = std::max(after, slot_of(ranks, x.rank, x.kind, x.mb - 1));
  return after;
}

// The passes re-packed by a unit-time eager run in slot order: each starts when its rank is free
// and what it needs (as above, Ws only after their rank's previous pass) has ended.
Ranks eager_slots(Ranks ranks) {
  Ranks end = ranks;
  std::vector<int> free_at(ranks.size(), 0);
  in_slot_order(ranks, [&](const Pass& x) {
    int ready = free_at[static_cast<size_t>(x.rank)];
    if (x.kind < kW1)
      ready = std::max(ready, needs_until(end, x) + 1);
    else if (x.mb > 0)
      ready = std::max(ready, slot_of(end, x.rank, x.kind, x.mb - 1) + 1);
    slot_of(end, x.rank, x.kind, x.mb) = ready;
    free_at[static_cast<size_t>(x.rank)] = ready + 1;
  });
  return end;
}

// Steps 2 and 3. The warm-up (before rank 0's first b) is squeezed only with the Ws in place; the
// steady state (until rank 0's last F) never moves.
Ranks squeeze(Ranks ranks, bool with_w) {
  if (with_w)
    for (Lists& r : ranks) r = put_w(r, false);
  int limit = 0;
  std::vector<RankMemory> memory;
  for (const Lists& r : ranks) {
    memory.emplace_back(r);
    limit = std::max(limit, memory.back().built_peak());
  }
  const int m = static_cast<int>(ranks.front()[kF0].size());
  std::vector<std::vector<char>> occupied;
  for (const Lists& r : ranks) occupied.emplace_back(static_cast<size_t>(r.back().back() + 1), 0);
  enum { WarmUp, Steady, CoolDown } phase = WarmUp;
  in_slot_order(ranks, [&](const Pass& x) {
    auto& taken = occupied[static_cast<size_t>(x.rank)];
    if (x.kind == kB0 && x.rank == 0 && phase == WarmUp) phase = Steady;
    const bool stays = phase == Steady || (phase == WarmUp && !with_w);
    if (phase == Steady && x.kind == kF0 && x.mb == m - 1) phase = CoolDown;
    if (stays) {
      taken[static_cast<size_t>(x.slot)] = 1;
      return;
    }
    const int after = needs_until(ranks, x);
    if (after >= x.slot)
      throw_runtime("v schedule: pass kind {} of micro-batch {} on rank {} sits before what it needs", x.kind, x.mb,
                    x.rank);
    int& slot = slot_of(ranks, x.rank, x.kind, x.mb);
    bool moved = false;
    for (int s = after + 1; s < x.slot && !moved; ++s) {
      if (taken[static_cast<size_t>(s)]) continue;
      slot = s;
      moved = memory[static_cast<size_t>(x.rank)].within(ranks[static_cast<size_t>(x.rank)], s, x.slot, limit);
    }
    if (!moved) slot = x.slot;
    else memory[static_cast<size_t>(x.rank)].accept(ranks[static_cast<size_t>(x.rank)]);
    taken[static_cast<size_t>(slot)] = 1;
  });
  if (!with_w)
    for (Lists& r : ranks) r = put_w(r, false);
  return eager_slots(std::move(ranks));
}

Schedule from_blocks(const ScheduleSpec& spec, const std::vector<std::array<int, 4>>& block) {
  const int p = spec.ranks, m = spec.microbatches;
  Ranks ranks;
  for (const auto& offsets : block) {
    Lists lists(4);
    for (size_t kind = 0; kind < 4; ++kind)
      for (int mb = 0; mb < m; ++mb) lists[kind].push_back(offsets[kind] + 6 * mb);
    ranks.push_back(std::move(lists));
  }
  ranks = squeeze(std::move(ranks), true);
  for (Lists& r : ranks) r.resize(4);
  ranks = squeeze(std::move(ranks), false);
  Schedule s = empty_v_schedule(spec);
  for (int r = 0; r < p; ++r) {
    Lists lists = ranks[static_cast<size_t>(r)];
    lists.resize(4);
    lists = put_w(lists, true);
    const int chunk0 = r, chunk1 = 2 * p - 1 - r;
    const Op op_of[] = {Op::F, Op::F, Op::B, Op::B, Op::W, Op::W};
    const int stage_of[] = {chunk0, chunk1, chunk1, chunk0, chunk1, chunk0};
    std::vector<std::pair<int, Action>> timed;
    for (int kind = kF0; kind <= kW0; ++kind)
      for (int mb = 0; mb < m; ++mb)
        timed.emplace_back(lists[static_cast<size_t>(kind)][static_cast<size_t>(mb)],
                           Action{op_of[kind], stage_of[kind], mb});
    std::sort(timed.begin(), timed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [slot, action] : timed) s.ranks[static_cast<size_t>(r)].push_back(action);
  }
  return s;
}

}  // namespace

Schedule make_v_min(const ScheduleSpec& spec) {
  const int p = spec.ranks;
  const int g = p % 3 == 0 ? 2 : 0;
  std::vector<std::array<int, 4>> block;
  for (int i = 0; i < p; ++i) block.push_back({i, 2 * p - i - 1, 2 * p + g + i, 4 * p + g - i - 1});
  return from_blocks(spec, block);
}

Schedule make_v_half(const ScheduleSpec& spec) {
  const int p = spec.ranks;
  const int g = p % 2 == 0 ? 3 : 0;
  std::vector<std::array<int, 4>> block;
  for (int i = 0; i < p; ++i) block.push_back({2 * i, 3 * p - i - 2, 3 * p + g + 2 * i - 1, 6 * p + g - i - 2});
  return from_blocks(spec, block);
}

}  // namespace pw
