// The profilers' repeat loops: how many runs each measurement gets, and that turns interleave them.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "profiler/repeat.hpp"

TEST_CASE("repeat_interleaved gives each item its share of runs and time in every turn") {
  // Each run takes 1/16 s (exact in binary); min_time 1 s over 4 turns: each item is timed until 1/4,
  // 2/4, 3/4, then 4/4 s in total, i.e. 4 runs a turn, 16 in all (min_repetitions 10 is reached first).
  // Per item: 3 warm-up runs, one untimed run per turn, 16 timed: 23 calls.
  pw::ProfileOptions o;
  o.warmup = 3;
  o.min_repetitions = 10;
  o.max_repetitions = 1000;
  o.min_time_s = 1.0;
  o.rounds = 4;
  std::string order;
  auto item = [&](char name) { return pw::TimedRun([&order, name] { order += name; return std::vector<double>{1.0 / 32, 1.0 / 32}; }); };
  const auto samples = pw::repeat_interleaved(o, 2, {item('a'), item('b')});
  REQUIRE(samples.size() == 2);
  for (const auto& s : samples) {
    CHECK(s.size() == 2);
    CHECK(s[0].size() == 16);
    CHECK(s[1].size() == 16);
  }
  const std::string turn = std::string(5, 'a') + std::string(5, 'b');
  CHECK(order == "aaabbb" + turn + turn + turn + turn);

  // Runs too short for the time: the count decides (10 over 4 turns: 3, 5, 8, 10 by the end of each).
  o.min_time_s = 0;
  order.clear();
  const auto counted = pw::repeat_interleaved(o, 2, {item('a')});
  CHECK(counted[0][0].size() == 10);
  CHECK(order == "aaa" + std::string(4, 'a') + std::string(3, 'a') + std::string(4, 'a') + std::string(3, 'a'));

  // repeat_phases: one item in one turn, with no untimed run beside the warm-up.
  order.clear();
  const auto alone = pw::repeat_phases(o, 2, [&] { order += 'x'; return std::vector<double>{0.0, 0.0}; });
  CHECK(alone[0].size() == 10);
  CHECK(order == std::string(13, 'x'));
}

TEST_CASE("median_of_turn_means keeps the hitches every turn meets and drops one turn's outlier") {
  // Turn means 2, 1.5 and 25.75: the median 2 keeps the first turn's 5 s hitch in its mean, and the third
  // turn's 100 s, met once, moves nothing.
  CHECK(pw::median_of_turn_means({{1, 1, 1, 5}, {1, 2, 1, 2}, {100, 1, 1, 1}}) == 2);
  // Two turns: the mean of their means; empty turns are skipped, no timings give 0.
  CHECK(pw::median_of_turn_means({{1, 3}, {}, {5}}) == 3.5);
  CHECK(pw::median_of_turn_means({}) == 0);
}
