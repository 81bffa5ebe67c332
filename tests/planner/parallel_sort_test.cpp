// The planner's parallel sort: std::sort's order, element for element, whatever the threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "planner/parallel_sort.hpp"

using namespace pw;

TEST_CASE("parallel_sort gives std::sort's order on any number of threads") {
  std::mt19937_64 rng(7);
  for (size_t count : {size_t{0}, size_t{5}, size_t{40000}, size_t{300001}}) {
    // Pairs with repeated first members, ordered by both: a total order, as the search's queue is.
    std::vector<std::pair<int, size_t>> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = {static_cast<int>(rng() % 97), i};
    std::shuffle(v.begin(), v.end(), rng);
    std::vector<std::pair<int, size_t>> expected = v;
    std::sort(expected.begin(), expected.end());
    for (int threads : {1, 2, 3, 8}) {
      std::vector<std::pair<int, size_t>> got = v;
      parallel_sort(threads, got.begin(), got.end(), std::less<>());
      INFO(threads << " threads, " << count << " elements");
      CHECK(got == expected);
    }
  }
}
