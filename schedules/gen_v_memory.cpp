#include <algorithm>
#include <array>
#include <limits>
#include <tuple>

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
constexpr int kF0 = 0, kF1 = 1, kB1 = 2, kB0 = 3, kW = 4, kW0 = 5;

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
// chunk 1's Ws (list kW) apart from chunk 0's (list kW0) and runs chunk 1's first.
Lists put_w(Lists lists, bool split) {
  const int bound = last_slot(lists);
  lists.resize(split ? 6 : 5);
  std::array<int, 2> owed{0, 0};
  Cursor at{};
  auto place = [&](int slot) {
    for (size_t w = 0; w < 2; ++w) {
      if (owed[w] == 0) continue;
      lists[kW + w].push_back(slot);
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

// Peak activations of one rank, in chunk micro-batches: F and f allocate one each, a W frees one;
// without W lists, each free slot runs an owed W. Stops at the first slot above `stop_above` (the
// squeeze only asks whether a move stays within its limit).
int peak_memory(const Lists& lists, int stop_above = std::numeric_limits<int>::max()) {
  const bool has_w = lists.size() > 4;
  const int bound = last_slot(lists);
  Cursor at{};
  int owed = 0, held = 0, peak = 0;
  for (int slot = 0; slot <= bound; ++slot) {
    const auto [time, kind] = next_pass(lists, at, static_cast<int>(lists.size()));
    if (time == slot) {
      ++at[static_cast<size_t>(kind)];
      if (kind == kF0 || kind == kF1) ++held;
      if (kind == kW) --held;
      if (kind == kB1 || kind == kB0) ++owed;
    } else if (!has_w && owed > 0) {
      --held;
      --owed;
    }
    peak = std::max(peak, held);
    if (peak > stop_above) break;
  }
  return peak;
}

struct Pass {
  int slot, rank, kind, mb;
  auto key() const { return std::tie(slot, rank, kind, mb); }
};

// Visits every pass of every rank in (slot, rank, kind, micro-batch) order; `visit` may move the
// visited pass to another slot, never one not yet visited.
template <typename Visit>
void in_slot_order(Ranks& ranks, Visit visit) {
  const size_t kinds = ranks.front().size();
  std::vector<std::vector<size_t>> at(ranks.size(), std::vector<size_t>(kinds, 0));
  size_t total = 0;
  for (const Lists& r : ranks)
    for (const auto& l : r) total += l.size();
  for (size_t n = 0; n < total; ++n) {
    Pass best{std::numeric_limits<int>::max(), 0, 0, 0};
    for (size_t r = 0; r < ranks.size(); ++r) {
      for (size_t t = 0; t < kinds; ++t) {
        if (at[r][t] >= ranks[r][t].size()) continue;
        const Pass next{ranks[r][t][at[r][t]], static_cast<int>(r), static_cast<int>(t), static_cast<int>(at[r][t])};
        if (next.key() < best.key()) best = next;
      }
    }
    ++at[static_cast<size_t>(best.rank)][static_cast<size_t>(best.kind)];
    visit(best);
  }
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
  if (x.kind > kF0 && x.kind < kW) after = std::max(after, slot_of(ranks, x.rank, x.kind - 1, x.mb));
  if (x.kind == kW) {
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
    if (x.kind < kW)
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
  for (const Lists& r : ranks) limit = std::max(limit, peak_memory(r));
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
      moved = peak_memory(ranks[static_cast<size_t>(x.rank)], limit) <= limit;
    }
    if (!moved) slot = x.slot;
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
