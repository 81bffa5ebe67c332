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

namespace {

pw::Plan piped(int tp, int pp, double step_s, double peak_bytes) {
  pw::Plan p = scored(tp, "1f1b", step_s, peak_bytes);
  p.config.pp = pp;
  return p;
}

std::vector<std::string> near_rows(int top, const std::vector<pw::Plan>& plans, const std::vector<int>& order) {
  pw::TopPlans kept(top, 0.01);
  for (int i : order) kept.add(plans[static_cast<size_t>(i)]);
  std::vector<std::string> out;
  for (const pw::Plan& p : kept.take()) out.push_back(fmt::format("tp{} pp{}", p.config.tp, p.config.pp));
  return out;
}

}  // namespace

TEST_CASE("plans within 1% of the fastest rank by fewer pipeline ranks, then less memory, in any scoring order") {
  // The fastest (tp 1, pp 16) is 100 s. Within 1% (up to 101 s): tp 2 at pp 8 (100.9 s, 70 GB), tp 4 at pp 8
  // (100.5 s, 60 GB) and tp 8 at pp 16 (100.2 s, 50 GB). Outside: tp 16 at pp 4 (101.5 s) and tp 32 at pp 2
  // (102 s), ranked by step time after them. Near ties: pp 8 before pp 16, and at pp 8 the 60 GB plan first.
  const std::vector<pw::Plan> plans = {piped(1, 16, 100.0, 70e9), piped(2, 8, 100.9, 70e9), piped(4, 8, 100.5, 60e9),
                                       piped(8, 16, 100.2, 50e9), piped(16, 4, 101.5, 10e9), piped(32, 2, 102.0, 10e9)};
  const std::vector<std::string> all = {"tp4 pp8", "tp2 pp8", "tp8 pp16", "tp1 pp16", "tp16 pp4", "tp32 pp2"};
  std::vector<int> order = {0, 1, 2, 3, 4, 5};
  int orders = 0;
  do {
    // K = 1 keeps every near tie until the end, so the preferred one leads even when scored first.
    CHECK(near_rows(1, plans, order) == std::vector<std::string>{"tp4 pp8"});
    CHECK(near_rows(5, plans, order) == std::vector<std::string>(all.begin(), all.begin() + 5));
    CHECK(near_rows(6, plans, order) == all);
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(orders == 720);

  // The threshold: the K-th best, or the fastest plus 1% when that is later.
  pw::TopPlans kept(1, 0.01);
  kept.add(plans[0]);
  CHECK(kept.threshold() == 100.0 * 1.01);
  kept.add(plans[5]);  // 102 s: above the threshold, dropped
  CHECK(kept.kept().size() == 1);
  kept.add(plans[3]);  // 100.2 s: a near tie, kept
  CHECK(kept.kept().size() == 2);
  CHECK(near_rows(2, {plans[0]}, {0}) == std::vector<std::string>{"tp1 pp16"});

  // Without a share, step time alone.
  pw::TopPlans plain(3);
  for (const pw::Plan& p : plans) plain.add(p);
  std::vector<std::string> fastest;
  for (const pw::Plan& p : plain.take()) fastest.push_back(fmt::format("tp{} pp{}", p.config.tp, p.config.pp));
  CHECK(fastest == std::vector<std::string>{"tp1 pp16", "tp8 pp16", "tp4 pp8"});
}
