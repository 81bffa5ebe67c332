// RangeMax, the partitioner's largest working set of a stage's layers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "planner/range_max.hpp"

using namespace pw;

TEST_CASE("RangeMax: the largest value of every range equals a scan") {
  std::mt19937 rng(7);
  for (int n : {1, 2, 3, 5, 8, 13, 64, 100}) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = std::uniform_real_distribution<double>(0, 100)(rng);
    const RangeMax rm(v);
    for (int b = 0; b <= n; ++b)
      for (int e = b; e <= n; ++e) {
        double scan = 0;
        for (int i = b; i < e; ++i) scan = std::max(scan, v[static_cast<size_t>(i)]);
        CHECK(rm.max(static_cast<size_t>(b), static_cast<size_t>(e)) == scan);
      }
  }
}
