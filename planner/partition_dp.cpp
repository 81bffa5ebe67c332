#include "planner/partition_dp.hpp"

#include <algorithm>

#include "core/special_values.hpp"

namespace pw {
namespace {

std::vector<LayerRange> backtrack(const std::vector<int>& arg, int stages, int layers) {
  const size_t width = static_cast<size_t>(layers) + 1;
  std::vector<LayerRange> ranges(static_cast<size_t>(stages));
  int end = layers;
  for (int k = stages; k >= 1; --k) {
    const int start = arg[static_cast<size_t>(k) * width + static_cast<size_t>(end)];
    ranges[static_cast<size_t>(k) - 1] = LayerRange{start, end - 1};
    end = start;
  }
  return ranges;
}

// The first start j to try for stage k - 1 (of k) ending at i: the stage starts right before i, except
// the first, which starts at 0.
int first_start(int k, int i) { return k == 1 ? 0 : i - 1; }
int last_start(int k) { return k == 1 ? 0 : k - 1; }

// The split that minimises the largest stage cost: best[k][i] = min over starts j of max(best[k-1][j],
// cost(j)), where cost = cost_at(s, i) prices stage s = k - 1 ending at i. A stage's cost only grows as it
// takes more layers, so the scan down from the shortest stage stops at the first start whose cost alone
// reaches the best so far. `empty` is the value of no stages at all.
template <typename CostAt>
Split min_max_split(const PartitionProblem& p, double empty, CostAt cost_at) {
  const int n = p.layers, S = p.stages;
  const size_t width = static_cast<size_t>(n) + 1;
  std::vector<double> best((static_cast<size_t>(S) + 1) * width, kInf);
  std::vector<int> arg(best.size(), -1);
  best[0] = empty;
  for (int k = 1; k <= S; ++k) {
    const int s = k - 1;
    const double* prev = &best[static_cast<size_t>(k - 1) * width];
    for (int i = k; i <= n - (S - k); ++i) {
      const auto cost = cost_at(s, i);
      double b = kInf;
      int a = -1;
      for (int j = first_start(k, i); j >= last_start(k); --j) {
        const double t = cost(j);
        if (t >= b) break;
        if (prev[j] == kInf) continue;
        const double c = std::max(prev[j], t);
        if (c < b) {
          b = c;
          a = j;
        }
      }
      best[static_cast<size_t>(k) * width + static_cast<size_t>(i)] = b;
      arg[static_cast<size_t>(k) * width + static_cast<size_t>(i)] = a;
    }
  }
  Split out;
  out.value = best[static_cast<size_t>(S) * width + static_cast<size_t>(n)];
  if (out.value < kInf) out.ranges = backtrack(arg, S, n);
  return out;
}

}  // namespace

// A stage's memory only grows as it takes more layers, so the first start that fits only moves right as the
// end does: two pointers, about two memory evaluations per (stage, end) instead of one per start scanned.
std::vector<int> lowest_starts(const PartitionProblem& p, const std::vector<double>& cap) {
  const int n = p.layers, S = p.stages;
  const size_t width = static_cast<size_t>(n) + 1;
  std::vector<int> lowest(static_cast<size_t>(S) * width, 0);
  for (int s = 0; s < S; ++s) {
    // The programmes only ask about stage s starting at first_start(s + 1, .) >= s (earlier stages non-empty)
    // and ending at most at n - (S - 1 - s) (later ones too); a start before s counts as one that fits.
    int j = s == 0 ? 0 : s;
    for (int i = s + 1; i <= n - (S - 1 - s); ++i) {
      while (j < i && p.stage_memory(s, j, i) > cap[static_cast<size_t>(s)]) ++j;
      lowest[static_cast<size_t>(s) * width + static_cast<size_t>(i)] = j;
    }
  }
  return lowest;
}

std::vector<double> rank_caps(const PartitionProblem& p) {
  std::vector<double> cap;
  for (int s = 0; s < p.stages; ++s) cap.push_back(p.rank_limit[static_cast<size_t>(p.stage_rank[static_cast<size_t>(s)])]);
  return cap;
}

Split min_bottleneck(const PartitionProblem& p, const std::vector<double>& cap, const std::vector<int>* lowest) {
  const size_t width = static_cast<size_t>(p.layers) + 1;
  const std::vector<int> own = lowest ? std::vector<int>{} : lowest_starts(p, cap);
  const std::vector<int>& low = lowest ? *lowest : own;
  return min_max_split(p, 0, [&](int s, int i) {
    const double xfer = p.transfer_time(s, i);
    const int fits = low[static_cast<size_t>(s) * width + static_cast<size_t>(i)];
    // Larger stages only get slower (with per-stage recompute too: a larger stage keeps its level or needs
    // a heavier one) and fuller (at the heaviest level, which decides whether any fits): a start before the
    // first that fits ends the scan like a time past the best.
    return [&p, s, i, xfer, fits](int j) { return j < fits ? kInf : p.compute_time(s, j, i) + xfer; };
  });
}

std::vector<double> suffix_bottlenecks(const PartitionProblem& p, const std::vector<double>& cap) {
  const int n = p.layers, S = p.stages;
  const size_t width = static_cast<size_t>(n) + 1;
  const std::vector<int> low = lowest_starts(p, cap);
  std::vector<double> suffix((static_cast<size_t>(S) + 1) * width, kInf);
  suffix[static_cast<size_t>(S) * width + static_cast<size_t>(n)] = 0;
  for (int s = S - 1; s >= 0; --s) {
    const double* next = &suffix[static_cast<size_t>(s + 1) * width];
    for (int j = s; j <= n - (S - s); ++j) {
      double b = kInf;
      const int first = s == S - 1 ? n : j + 1;
      for (int i = first; i <= n - (S - s - 1); ++i) {
        const double t = p.stage_time(s, j, i);
        if (p.compute_time(s, j, i) >= b) break;  // the transfer varies with i; the compute only grows
        if (j < low[static_cast<size_t>(s) * width + static_cast<size_t>(i)]) break;
        if (next[i] == kInf) continue;
        b = std::min(b, std::max(next[i], t));
      }
      suffix[static_cast<size_t>(s) * width + static_cast<size_t>(j)] = b;
    }
  }
  return suffix;
}

namespace {

// finish[k][i]: stages k .. S - 1 can cover layers [i, n) within the limit and caps. Prefixes that cannot
// finish are never kept, so every prefix a programme keeps belongs to a complete split.
std::vector<char> finishable(const PartitionProblem& p, const std::vector<int>& low, double limit) {
  const int n = p.layers, S = p.stages;
  const size_t width = static_cast<size_t>(n) + 1;
  std::vector<char> finish((static_cast<size_t>(S) + 1) * width, 0);
  finish[static_cast<size_t>(S) * width + static_cast<size_t>(n)] = 1;
  for (int s = S - 1; s >= 0; --s)
    for (int j = s; j <= n - (S - s); ++j) {
      char ok = 0;
      for (int i = s == S - 1 ? n : j + 1; i <= n - (S - s - 1) && !ok; ++i) {
        if (p.compute_time(s, j, i) > limit) break;
        if (j < low[static_cast<size_t>(s) * width + static_cast<size_t>(i)]) break;
        ok = p.stage_time(s, j, i) <= limit && finish[static_cast<size_t>(s + 1) * width + static_cast<size_t>(i)];
      }
      finish[static_cast<size_t>(s) * width + static_cast<size_t>(j)] = ok;
    }
  return finish;
}

// A prefix in the secondary order: the sum of its stage times, then their squares, then the later start of
// its last stage, then its place in the previous stage's list.
struct Entry {
  double sum, squares;
  int start, index;  // the previous stage's list: at (k - 1, start), entry `index`
};

bool before(const Entry& a, const Entry& b) {
  if (a.sum != b.sum) return a.sum < b.sum;
  if (a.squares != b.squares) return a.squares < b.squares;
  if (a.start != b.start) return a.start > b.start;
  return a.index < b.index;
}

// visit(j, t) for every start j of stage k - 1 ending at layer i (the last start first) while its stage time t
// is within the limit and its memory fits: what the tie programmes scan for each (stage, end).
template <typename Visit>
void within_limit(const PartitionProblem& p, const std::vector<int>& low, double limit, int k, int i, Visit visit) {
  const int s = k - 1;
  const int lowest = low[static_cast<size_t>(s) * (static_cast<size_t>(p.layers) + 1) + static_cast<size_t>(i)];
  for (int j = first_start(k, i); j >= last_start(k) && j >= lowest; --j) {
    const double t = p.stage_time(s, j, i);
    if (t > limit) break;
    visit(j, t);
  }
}

// best_splits_within with k = 1: one prefix per (stage, end), kept in flat arrays; the same choice as the
// lists' (the least candidate by `before`), without a list per cell.
std::vector<std::vector<LayerRange>> best_split_within(const PartitionProblem& p, const std::vector<int>& low,
                                                       double limit, double* count) {
  const int n = p.layers, S = p.stages;
  const size_t width = static_cast<size_t>(n) + 1;
  const std::vector<char> finish = finishable(p, low, limit);
  const size_t cells = (static_cast<size_t>(S) + 1) * width;
  std::vector<Entry> best(cells, Entry{0, 0, -1, -1});
  std::vector<char> has(cells, 0);
  std::vector<double> counts(cells, 0.0);
  has[0] = 1;
  counts[0] = 1;
  for (int k = 1; k <= S; ++k) {
    for (int i = k; i <= n - (S - k); ++i) {
      const size_t here = static_cast<size_t>(k) * width + static_cast<size_t>(i);
      if (!finish[here]) continue;
      double ways = 0;
      within_limit(p, low, limit, k, i, [&](int j, double t) {
        const size_t from = static_cast<size_t>(k - 1) * width + static_cast<size_t>(j);
        ways += counts[from];
        if (!has[from]) return;
        const Entry e{best[from].sum + t, best[from].squares + t * t, j, 0};
        if (!has[here] || before(e, best[here])) {
          best[here] = e;
          has[here] = 1;
        }
      });
      counts[here] = ways;
    }
  }
  const size_t last = static_cast<size_t>(S) * width + static_cast<size_t>(n);
  if (count) *count = counts[last];
  if (!has[last]) return {};
  std::vector<LayerRange> ranges(static_cast<size_t>(S));
  int end = n;
  for (int k = S; k >= 1; --k) {
    const int start = best[static_cast<size_t>(k) * width + static_cast<size_t>(end)].start;
    ranges[static_cast<size_t>(k) - 1] = LayerRange{start, end - 1};
    end = start;
  }
  return {std::move(ranges)};
}

}  // namespace

std::vector<std::vector<LayerRange>> best_splits_within(const PartitionProblem& p, const std::vector<double>& cap,
                                                        double limit, int k_best, double* count,
                                                        const std::vector<int>* lowest) {
  const std::vector<int> own = lowest ? std::vector<int>{} : lowest_starts(p, cap);
  const std::vector<int>& low = lowest ? *lowest : own;
  if (k_best <= 1) return best_split_within(p, low, limit, count);
  const int n = p.layers, S = p.stages;
  const size_t width = static_cast<size_t>(n) + 1;
  const size_t keep = static_cast<size_t>(k_best);
  const std::vector<char> finish = finishable(p, low, limit);

  std::vector<std::vector<Entry>> lists((static_cast<size_t>(S) + 1) * width);
  std::vector<double> counts(lists.size(), 0.0);
  lists[0].push_back(Entry{0, 0, -1, -1});
  counts[0] = 1;
  std::vector<Entry> candidates;
  for (int k = 1; k <= S; ++k) {
    for (int i = k; i <= n - (S - k); ++i) {
      if (!finish[static_cast<size_t>(k) * width + static_cast<size_t>(i)]) continue;
      candidates.clear();
      double ways = 0;
      within_limit(p, low, limit, k, i, [&](int j, double t) {
        const size_t from = static_cast<size_t>(k - 1) * width + static_cast<size_t>(j);
        ways += counts[from];
        const std::vector<Entry>& prev = lists[from];
        for (size_t e = 0; e < prev.size(); ++e)
          candidates.push_back(Entry{prev[e].sum + t, prev[e].squares + t * t, j, static_cast<int>(e)});
      });
      if (candidates.size() > keep) {
        std::nth_element(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end(),
                         before);
        candidates.resize(keep);
      }
      std::sort(candidates.begin(), candidates.end(), before);
      const size_t here = static_cast<size_t>(k) * width + static_cast<size_t>(i);
      lists[here] = candidates;
      counts[here] = ways;
    }
  }
  const size_t last = static_cast<size_t>(S) * width + static_cast<size_t>(n);
  if (count) *count = counts[last];
  std::vector<std::vector<LayerRange>> out;
  for (const Entry& top : lists[last]) {
    std::vector<LayerRange> ranges(static_cast<size_t>(S));
    Entry e = top;
    int end = n;
    for (int k = S; k >= 1; --k) {
      ranges[static_cast<size_t>(k) - 1] = LayerRange{e.start, end - 1};
      end = e.start;
      if (k > 1) e = lists[static_cast<size_t>(k - 1) * width + static_cast<size_t>(e.start)][static_cast<size_t>(e.index)];
    }
    out.push_back(std::move(ranges));
  }
  return out;
}

Split min_memory_excess(const PartitionProblem& p, const std::vector<double>& cap) {
  // Larger stages only need more.
  return min_max_split(p, -kInf, [&](int s, int i) {
    return [&p, &cap, s, i](int j) { return p.stage_memory(s, j, i) - cap[static_cast<size_t>(s)]; };
  });
}

}  // namespace pw
