#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "planner/top_plans.hpp"

namespace {

pw::Plan scored(int tp, const std::string& schedule, double step_s, double peak_bytes) {
  pw::Plan p;
  p.config.tp = tp;
  p.config.schedule = schedule;
  p.evaluation.metrics.step_time_s = step_s;
  p.evaluation.metrics.peak_memory_bytes = peak_bytes;
  return p;
}

// Each plan as "tp/schedule" with its twins after ':'.
std::vector<std::string> rows(const std::vector<pw::Plan>& plans) {
  std::vector<std::string> out;
  for (const pw::Plan& p : plans) {
    std::string row = fmt::format("{}/{}", p.config.tp, p.config.schedule);
    for (const pw::Candidate& t : p.twins) row += fmt::format(":{}/{}", t.tp, t.schedule);
    out.push_back(row);
  }
  return out;
}

std::vector<std::string> take_in_order(int top, const std::vector<pw::Plan>& plans, const std::vector<int>& order) {
  pw::TopPlans kept(top);
  for (int i : order) kept.add(plans[static_cast<size_t>(i)]);
  return rows(kept.take());
}

}  // namespace

TEST_CASE("the top plans and their twins do not depend on the order the plans were scored in") {
  // In config order 1f1b < gpipe < interleaved. "1f1b" and "interleaved" are twins (same step and memory);
  // "gpipe" ties on the step but not on memory, so it sits between them in the ranking and is no twin.
  // Scored as interleaved, gpipe, 1f1b, a top that dropped the tied "interleaved" when "gpipe" came would
  // list "1f1b" without its twin.
  const std::vector<pw::Plan> plans = {scored(2, "1f1b", 1.0, 10e9),        scored(2, "gpipe", 1.0, 12e9),
                                       scored(2, "interleaved", 1.0, 10e9), scored(4, "1f1b", 0.5, 10e9),
                                       scored(8, "1f1b", 2.0, 10e9)};
  std::vector<int> order = {0, 1, 2, 3, 4};
  const std::vector<std::string> top1 = {"4/1f1b"};
  const std::vector<std::string> top2 = {"4/1f1b", "2/1f1b:2/interleaved"};
  const std::vector<std::string> top3 = {"4/1f1b", "2/1f1b:2/interleaved", "2/gpipe"};
  int orders = 0;
  do {
    CHECK(take_in_order(1, plans, order) == top1);
    CHECK(take_in_order(2, plans, order) == top2);
    CHECK(take_in_order(3, plans, order) == top3);
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(orders == 120);

  const std::vector<pw::Plan> tied = {plans[0], plans[1], plans[2]};
  std::vector<int> three = {2, 1, 0};
  CHECK(take_in_order(1, tied, three) == std::vector<std::string>{"2/1f1b:2/interleaved"});
}

TEST_CASE("the threshold of the top plans is the K-th best step time, infinite until K are kept") {
  pw::TopPlans kept(2);
  CHECK(kept.threshold() == std::numeric_limits<double>::infinity());
  kept.add(scored(2, "1f1b", 3.0, 1e9));
  CHECK(kept.threshold() == std::numeric_limits<double>::infinity());
  kept.add(scored(2, "interleaved", 3.0, 1e9));  // a twin: still one row
  CHECK(kept.threshold() == std::numeric_limits<double>::infinity());
  kept.add(scored(4, "1f1b", 2.0, 1e9));
  CHECK(kept.threshold() == 3.0);
  kept.add(scored(8, "1f1b", 1.0, 1e9));
  CHECK(kept.threshold() == 2.0);
  CHECK(rows(kept.take()) == std::vector<std::string>{"8/1f1b", "4/1f1b"});
}
