#include <algorithm>
#include <utility>

#include "core/error.hpp"
#include "schedules/families.hpp"

namespace pw {

namespace {

// Megatron's rule for group size N: p <= N <= m, and the last group is either full or holds at
// least p micro-batches (a shorter one stalls the pipeline on its dependencies).
bool valid_microbatches(int m, int p, int n) { return m >= p && m >= n && (m % n == 0 || m % n >= p); }

void check_interleaved(const ScheduleSpec& spec, int n) {
  const int p = spec.ranks, m = spec.microbatches;
  if (spec.chunks < 2)
    throw_bad_input("--vpp: interleaved needs at least 2 chunks per rank; use --vpp 2 or more, or --schedule 1f1b");
  if (m < p)
    throw_bad_input("--microbatches: interleaved needs at least as many micro-batches as --pp ({}), got {}; use {} or more",
                    p, m, p);
  if (n < p || n > m)
    throw_bad_input("--group-size: interleaved needs a group size from --pp to --microbatches ({}..{}), got {}",
                    p, m, n);
  if (valid_microbatches(m, p, n)) return;
  int below = m - 1;
  while (!valid_microbatches(below, p, n)) --below;  // stops at n at the latest
  int above = m + 1;
  while (!valid_microbatches(above, p, n)) ++above;  // stops at the next multiple of n at the latest
  if (n == p)
    throw_bad_input("--microbatches: interleaved with micro-batch group size {} needs a multiple of {}, got {}; use {} or {}",
                    n, n, m, below, above);
  throw_bad_input(
      "--microbatches: interleaved with micro-batch group size {} needs a multiple of {} or a remainder of at least "
      "--pp ({}), got {}; use {} or {}",
      n, n, p, m, below, above);
}

// Megatron's get_schedule_table: virtual micro-batch k -> (micro-batch, chunk). Groups of N
// micro-batches run through chunk 0, then chunk 1, ...; the last group takes what is left.
std::vector<std::pair<int, int>> schedule_table(int m, int v, int n) {
  std::vector<std::pair<int, int>> table;
  for (int first = 0; first < m; first += n) {
    const int end = first + n >= m ? m : first + n;
    for (int c = 0; c < v; ++c)
      for (int i = first; i < end; ++i) table.emplace_back(i, c);
  }
  return table;
}

}  // namespace

// Megatron's depth-first interleaved 1F1B (forward_backward_pipelining_with_interleaving): rank r
// holds stages c p + r for chunks c; warm-up (p - r - 1) 2 + (v - 1) N forwards, then one forward and
// one backward per step; backwards walk the chunks in reverse.
Schedule make_interleaved(const ScheduleSpec& spec) { return interleaved_order(spec, false); }

Schedule interleaved_order(const ScheduleSpec& spec, bool combined) {
  const int p = spec.ranks, m = spec.microbatches, v = spec.chunks;
  const int n = spec.group_size == 0 ? p : spec.group_size;
  check_interleaved(spec, n);
  Schedule s = empty_schedule(spec, v);
  const auto table = schedule_table(m, v, n);
  const int total = m * v;
  for (int r = 0; r < p; ++r) {
    auto forward = [&](int k) { return Action{Op::F, table[k].second * p + r, table[k].first}; };
    auto backward = [&](int k) { return Action{Op::BW, (v - 1 - table[k].second) * p + r, table[k].first}; };
    auto& list = s.ranks[static_cast<size_t>(r)];
    // Megatron's combined 1F1B adds one warm-up forward, so that no step's backward needs its forward.
    const int warmup = std::min((p - r - 1) * 2 + (v - 1) * n + (combined ? 1 : 0), total);
    for (int k = 0; k < warmup; ++k) list.push_back(forward(k));
    for (int k = 0; k < total - warmup; ++k) {
      const Action f = forward(k + warmup), b = backward(k);
      if (combined)
        list.push_back(Action{Op::FB, f.stage, f.microbatch, b.stage, b.microbatch});
      else {
        list.push_back(f);
        list.push_back(b);
      }
    }
    for (int k = total - warmup; k < total; ++k) list.push_back(backward(k));
  }
  return s;
}

}  // namespace pw
