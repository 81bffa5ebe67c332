// The planner's parallel loop: every index once, whatever the threads, and a worker's failure reaches the caller.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <stdexcept>
#include <vector>

#include "planner/parallel_for.hpp"

using namespace pw;

TEST_CASE("parallel_for runs every index once on any number of threads") {
  for (int threads : {0, 1, 2, 7}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}}) {
      std::vector<std::atomic<int>> runs(count);
      parallel_for(threads, count, [&](size_t i) { ++runs[i]; });
      INFO(threads << " threads, " << count << " indices");
      for (size_t i = 0; i < count; ++i) CHECK(runs[i] == 1);
    }
  }
  CHECK(thread_count(3) == 3);
  CHECK(thread_count(0) >= 1);
}

TEST_CASE("parallel_for rethrows what a worker threw, after every worker stopped") {
  std::atomic<int> done{0};
  CHECK_THROWS_WITH(parallel_for(4, 100,
                                 [&](size_t i) {
                                   if (i == 37) throw std::runtime_error("index 37");
                                   ++done;
                                 }),
                    "index 37");
  CHECK(done <= 99);
}

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
