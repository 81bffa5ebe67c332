#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>

#include "core/balanced_split.hpp"
#include "core/model.hpp"
#include "core/stage_costs.hpp"

using namespace pw;

namespace {

using Split = std::vector<std::pair<int, int>>;

// The dynamic programme split_layers ran before, O(stages x layers^2): the least largest stage, then
// the least sum of squares among splits within it, the earliest start of the last stage on ties.
Split quadratic_split(const std::vector<double>& cost, int stages) {
  const int n = static_cast<int>(cost.size());
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  auto seg = [&](int j, int i) { return prefix[i] - prefix[j]; };
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) best[k][i] = std::min(best[k][i], std::max(best[k - 1][j], seg(j, i)));
  const double limit = best[stages][n];
  std::vector<std::vector<double>> squares(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, -1));
  squares[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        const double c = seg(j, i);
        if (c > limit || squares[k - 1][j] == inf) continue;
        if (squares[k - 1][j] + c * c < squares[k][i]) {
          squares[k][i] = squares[k - 1][j] + c * c;
          cut[k][i] = j;
        }
      }
  Split ranges(stages);
  for (int k = stages, end = n; k >= 1; --k) {
    ranges[k - 1] = {cut[k][end], end - 1};
    end = cut[k][end];
  }
  return ranges;
}

}  // namespace

TEST_CASE("balanced split: the same split as the quadratic programme on small inputs") {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 600; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 24);
    const int stages = 1 + static_cast<int>(rng() % n);
    std::vector<double> cost(n);
    const int kind = trial % 4;
    for (double& c : cost) {
      if (kind == 0) c = 1;                                                            // uniform blocks
      else if (kind == 1) c = static_cast<double>(rng() % 5);                          // small whole numbers, zeros
      else if (kind == 2) c = std::uniform_real_distribution<double>(0.5, 2.0)(rng);  // measured-looking
      else c = rng() % 7 == 0 ? 40.0 : 1.0;                                            // a few dominating layers
    }
    if (kind == 0 && n > 2) cost.front() = cost.back() = 0;  // embedding and head
    INFO("trial " << trial << ": " << n << " layers, " << stages << " stages");
    CHECK(balanced_split(cost, stages) == quadratic_split(cost, stages));
  }
}

TEST_CASE("balanced split: costs near the top of the double range split as their scaled copies do") {
  // Squares of 1e200 overflow; the split is scale-free, and the quadratic programme read out of bounds.
  const std::vector<double> small = {1, 3, 2, 2, 5, 1};
  std::vector<double> huge = small;
  for (double& c : huge) c *= 1e200;
  CHECK(balanced_split(huge, 3) == balanced_split(small, 3));
  CHECK(balanced_split(huge, 3) == Split{{0, 1}, {2, 3}, {4, 5}});
}

TEST_CASE("balanced split: thousands of layers, which took the quadratic programme seconds") {
  // 20,002 layers (embedding, 20,000 blocks, head) into 64 stages: the quadratic programme made
  // 64 x 20,002^2 / 2 = 1.3e10 steps; each stage now gets 312 or 313 blocks.
  Model m;
  m.layers.push_back({"embedding", LayerKind::Embedding, std::nullopt});
  for (int i = 0; i < 20000; ++i) m.layers.push_back({"block", LayerKind::Block, std::nullopt});
  m.layers.push_back({"head", LayerKind::Head, std::nullopt});
  const std::vector<LayerRange> ranges = split_layers(m, 64, {});
  REQUIRE(ranges.size() == 64);
  int blocks = 0;
  for (size_t s = 0; s < ranges.size(); ++s) {
    const int held = ranges[s].count() - (s == 0 ? 1 : 0) - (s + 1 == ranges.size() ? 1 : 0);
    CHECK((held == 312 || held == 313));
    blocks += held;
    if (s > 0) CHECK(ranges[s].first == ranges[s - 1].last + 1);
  }
  CHECK(blocks == 20000);
  // 20,000 = 64 x 312 + 32: the 32 stages with an extra block are the last ones.
  CHECK(ranges.front().count() == 313);
  CHECK(ranges.back().count() == 314);
  // Measured-looking costs on the same layers keep the largest stage the uniform bound allows.
  std::vector<double> cost(m.layers.size(), 1.0);
  cost[5000] = 300;
  const std::vector<LayerRange> uneven = split_layers(m, 64, {}, cost);
  double largest = 0;
  for (const LayerRange& r : uneven) {
    double sum = 0;
    for (int i = r.first; i <= r.last; ++i) sum += cost[static_cast<size_t>(i)];
    largest = std::max(largest, sum);
  }
  // Whole-number costs: the optimum is the least whole number that 64 greedy stages reach.
  const auto stages_needed = [&](double limit) {
    int stages = 1;
    double held = 0;
    for (double c : cost) {
      if (held + c > limit) {
        ++stages;
        held = 0;
      }
      held += c;
    }
    return stages;
  };
  CHECK(stages_needed(largest) <= 64);
  CHECK(stages_needed(largest - 1) > 64);
}
