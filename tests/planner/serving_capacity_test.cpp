// serve plan --max-rate's search (planner/serving_capacity.hpp): the bisection's bounds and precision on a
// known threshold, and its answers at the edges.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.hpp"
#include "planner/serving_capacity.hpp"

using namespace pw;

TEST_CASE("highest_rate: within the asked precision below a known threshold, 0 and high at the edges") {
  int calls = 0;
  const auto below = [&](double threshold) {
    return [&calls, threshold](double rate) {
      ++calls;
      return rate <= threshold;
    };
  };
  const double found = highest_rate(below(7.3), 0.01, 100, 0.005);
  CHECK(found <= 7.3);
  CHECK(found * 1.005 > 7.3);
  // log2(log(100 / 0.01) / log(1.005)) halvings of the ratio, and the two ends.
  CHECK(calls <= 2 + 11);
  CHECK(highest_rate(below(0.001), 0.01, 100, 0.005) == 0);
  CHECK(highest_rate(below(1000), 0.01, 100, 0.005) == 100);
  try {
    highest_rate(below(1), 2, 1, 0.005);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "highest_rate: needs 0 < low < high and 0 < relative < 1, got 2, 1 and 0.005");
  }
}
