// The planner's parallel loop: every index once, whatever the threads, and a worker's failure reaches the caller.
#include <catch2/catch.hpp>

#include <atomic>
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
