#include "core/balanced_split.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "core/special_values.hpp"

namespace pw {

namespace {

// Prefix sums of the costs; a stage over layers [j, i) costs prefix[i] - prefix[j]. Rounding is
// monotone, so that difference grows with i and shrinks with j, which the greedy passes and the
// monotone search below rely on.
class Costs {
 public:
  explicit Costs(const std::vector<double>& cost) : prefix_(cost.size() + 1, 0) {
    for (size_t i = 0; i < cost.size(); ++i) prefix_[i + 1] = prefix_[i] + cost[i];
  }
  int layers() const { return static_cast<int>(prefix_.size()) - 1; }
  double total() const { return prefix_.back(); }
  double stage(int j, int i) const { return prefix_[static_cast<size_t>(i)] - prefix_[static_cast<size_t>(j)]; }

 private:
  std::vector<double> prefix_;
};

// The fewest stages of cost <= limit that hold the first i layers, for every i (fewest[0] = 0), by
// taking the last stage as long as it can be; `start[i]` is where that stage starts. Infinite when a
// layer alone costs more than limit.
struct PrefixCover {
  std::vector<int> start;
  std::vector<double> fewest;
};

PrefixCover cover_prefixes(const Costs& c, double limit) {
  const int n = c.layers();
  PrefixCover p{std::vector<int>(static_cast<size_t>(n) + 1, 0), std::vector<double>(static_cast<size_t>(n) + 1, 0)};
  int j = 0;
  for (int i = 1; i <= n; ++i) {
    while (j < i && c.stage(j, i) > limit) ++j;
    p.start[static_cast<size_t>(i)] = j;
    p.fewest[static_cast<size_t>(i)] = j == i ? kInf : p.fewest[static_cast<size_t>(j)] + 1;
  }
  return p;
}

// The same for the last n - j layers: fewest stages that hold layers [j, n).
std::vector<double> cover_suffixes(const Costs& c, double limit) {
  const int n = c.layers();
  std::vector<double> fewest(static_cast<size_t>(n) + 1, 0);
  int i = n;
  for (int j = n - 1; j >= 0; --j) {
    while (i > j && c.stage(j, i) > limit) --i;
    fewest[static_cast<size_t>(j)] = i == j ? kInf : fewest[static_cast<size_t>(i)] + 1;
  }
  return fewest;
}

bool fits(const Costs& c, double limit, int stages) { return cover_prefixes(c, limit).fewest.back() <= stages; }

// The smallest largest stage cost: the least double `limit` such that `stages` stages of cost <= limit
// hold every layer. Non-negative doubles order as their bit patterns, so a binary search over those
// finds it exactly in at most 64 greedy passes.
double smallest_bottleneck(const Costs& c, int stages) {
  std::uint64_t lo = 0, hi = std::bit_cast<std::uint64_t>(c.total());
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (fits(c, std::bit_cast<double>(mid), stages)) hi = mid;
    else lo = mid + 1;
  }
  return std::bit_cast<double>(lo);
}

// One row of the dynamic programme: the least sum of squares over splits of the first i layers into k
// stages of cost <= limit, for i in [first, first + best.size()), and where the k-th stage starts.
struct Row {
  int first = 0;
  std::vector<double> best;
  std::vector<int> cut;
  int last() const { return first + static_cast<int>(best.size()) - 1; }
  double at(int i) const { return best[static_cast<size_t>(i - first)]; }
};

// Row k from row k - 1. The cost (stage cost)^2 is Monge and where stage k may start is an interval that
// moves right with i, so the smallest best start moves right with i too: divide and conquer over i, each
// half searching only the starts the middle leaves it.
class RowSolver {
 public:
  RowSolver(const Costs& c, const PrefixCover& cover, double limit, const Row& prev, Row& row)
      : c_(c), cover_(cover), limit_(limit), prev_(prev), row_(row) {}

  void solve() { solve(row_.first, row_.last(), prev_.first, prev_.last()); }

 private:
  const Costs& c_;
  const PrefixCover& cover_;
  double limit_;
  const Row& prev_;
  Row& row_;

  // The smallest best start of stage k for a split ending at i among starts [from, to]; -1 if none.
  int best_start(int i, int from, int to, double& best) const {
    from = std::max(from, cover_.start[static_cast<size_t>(i)]);
    to = std::min(to, i - 1);
    int arg = -1;
    for (int j = from; j <= to; ++j) {
      const double s = c_.stage(j, i);
      if (s > limit_) continue;
      const double total = prev_.at(j) + s * s;
      if (total < best) {
        best = total;
        arg = j;
      }
    }
    return arg;
  }

  void solve(int lo, int hi, int from, int to) {
    if (lo > hi) return;
    const int mid = lo + (hi - lo) / 2;
    double best = kInf;
    int arg = best_start(mid, from, to, best);
    // Rounding can bend the monotonicity by an ulp; the whole range then decides.
    if (arg < 0) arg = best_start(mid, prev_.first, prev_.last(), best);
    if (arg < 0) throw_runtime("balanced_split: no stage can end at layer {}", mid);
    row_.best[static_cast<size_t>(mid - row_.first)] = best;
    row_.cut[static_cast<size_t>(mid - row_.first)] = arg;
    solve(lo, mid - 1, from, arg);
    solve(mid + 1, hi, arg, to);
  }
};

// Costs scaled by a power of two (exact) so that sums of squares of stage costs stay finite.
std::vector<double> in_range(const std::vector<double>& cost) {
  const double top = cost.empty() ? 0 : *std::max_element(cost.begin(), cost.end());
  if (top <= 1e100) return cost;
  std::vector<double> scaled(cost);
  for (double& x : scaled) x = std::ldexp(x, -std::ilogb(top));
  return scaled;
}

}  // namespace

std::vector<std::pair<int, int>> balanced_split(const std::vector<double>& layer_cost, int stages) {
  const Costs c(in_range(layer_cost));
  const int n = c.layers();
  if (stages < 1 || stages > n) throw_runtime("balanced_split: {} stages for {} layers", stages, n);
  const double limit = smallest_bottleneck(c, stages);
  const PrefixCover prefix = cover_prefixes(c, limit);
  const std::vector<double> suffix = cover_suffixes(c, limit);

  // Row k holds the i where stage k may end: the first i layers fit in k stages and the rest in the
  // stages left, each needing at least one layer. Both bounds move right with k.
  std::vector<Row> rows(static_cast<size_t>(stages) + 1);
  rows[0] = Row{0, {0.0}, {-1}};
  for (int k = 1; k <= stages; ++k) {
    const int left = stages - k;
    const auto fits_prefix = [&](int i) { return prefix.fewest[static_cast<size_t>(i)] <= k; };
    const auto fits_suffix = [&](int i) { return suffix[static_cast<size_t>(i)] <= left; };
    // fewest grows with i for prefixes and shrinks for suffixes: binary searches give the bounds.
    int first = k, last = n - left;
    {
      int lo = first, hi = last;
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (fits_suffix(mid)) hi = mid;
        else lo = mid + 1;
      }
      first = lo;
    }
    {
      int lo = first, hi = last;
      while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (fits_prefix(mid)) lo = mid;
        else hi = mid - 1;
      }
      last = lo;
    }
    Row& row = rows[static_cast<size_t>(k)];
    row.first = first;
    row.best.assign(static_cast<size_t>(last - first + 1), kInf);
    row.cut.assign(static_cast<size_t>(last - first + 1), -1);
    RowSolver(c, prefix, limit, rows[static_cast<size_t>(k) - 1], row).solve();
  }

  std::vector<std::pair<int, int>> ranges(static_cast<size_t>(stages));
  int end = n;
  for (int k = stages; k >= 1; --k) {
    const Row& row = rows[static_cast<size_t>(k)];
    const int start = row.cut[static_cast<size_t>(end - row.first)];
    ranges[static_cast<size_t>(k) - 1] = {start, end - 1};
    end = start;
  }
  return ranges;
}

}  // namespace pw
