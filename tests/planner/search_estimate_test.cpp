// The search's estimate before work, and the divisor loop that used to overflow at 2^31 - 1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>

#include "../error_text.hpp"
#include "core/analytic_cost_model.hpp"
#include "planner/search.hpp"
#include "planner/search_estimate.hpp"
#include "sim/simulation_estimate.hpp"

using namespace pw;

namespace {

Scenario base(int global_batch) {
  Scenario s;
  s.model = load_model("gpt3-175b");
  s.cluster = cluster_preset("dgx-a100-80gb");
  s.global_batch_size = global_batch;
  return s;
}

}  // namespace

TEST_CASE("enumerate_candidates: a prime global batch of 2^31 - 1 gives micro-batch sizes 1 and itself") {
  SearchSpace space;
  space.gpus = 8;
  space.tp = 8;
  space.schedules = {"1f1b"};
  space.recomputes = {Recompute::None};
  const std::vector<Candidate> c = enumerate_candidates(base(std::numeric_limits<int>::max()), space);
  REQUIRE(c.size() == 2);
  CHECK(c[0].micro_batch_size == 1);
  CHECK(c[0].microbatches == std::numeric_limits<int>::max());
  CHECK(c[1].micro_batch_size == std::numeric_limits<int>::max());
  CHECK(c[1].microbatches == 1);
}

TEST_CASE("search_estimate: the largest candidate times the threads, and the cache") {
  std::vector<Candidate> candidates{Candidate{8, 1, 1, 1, 1, 1000, "1f1b"}, Candidate{4, 2, 1, 1, 1, 1000, "1f1b"},
                                    Candidate{2, 2, 2, 2, 1, 500, "interleaved"}};
  CHECK(candidate_actions(candidates[0]) == 3000);
  CHECK(candidate_actions(candidates[1]) == 6000);
  CHECK(candidate_actions(candidates[2]) == 6000);
  const WorkEstimate e = search_estimate(candidates, 2);
  CHECK(e.work == "3 candidates, the largest 6,000 actions (tp=4, pp=2, dp=1, micro-batch size 1, 1f1b and no recompute, "
                  "1000 micro-batches)");
  CHECK(e.bytes == Approx(2 * 6000 * kSimBytesPerAction + 15000 * 20 + 3 * sizeof(Candidate)));
  CHECK(e.seconds == 0);
  CHECK(search_estimate({}, 2).bytes == 0);
}

TEST_CASE("search_estimate: plan --global-batch-size 1000000000 is refused before any candidate is scored") {
  SearchSpace space;
  space.gpus = 8;
  const WorkEstimate e = search_estimate(enumerate_candidates(base(1000000000), space), 2);
  CHECK(bad_input([&] { check_work("plan", {e}, WorkLimits{64e9, 600}); }).starts_with("plan: "));
  CHECK(e.bytes > 1e12);
}

TEST_CASE("search_time_estimate: the elapsed time plus what the bound leaves, at the measured rate or faster") {
  SearchProgress p;
  p.elapsed_s = 60;
  p.considered = 25;
  p.considered_actions = 1.08e8;
  p.left = 15817;
  p.left_actions = 2e9;
  p.threads = 2;
  WorkEstimate e = search_time_estimate(p);
  CHECK(e.work == "after 1.0 min and 25 configurations (108,000,000 actions), the search's 15,817 remaining "
                  "(2,000,000,000 actions; fewer than 5 plans scored to bound them)");
  // 60 s over 1.08e8 actions is slower than the floor of 0.15 us an action at 2 threads.
  CHECK(e.seconds == Approx(60 + 2e9 * 60 / 1.08e8));
  p.bounded = true;
  p.elapsed_s = 1;
  e = search_time_estimate(p);
  CHECK(e.work.ends_with("(2,000,000,000 actions; those under the step-time bound of its 5 best plans)"));
  CHECK(e.seconds == Approx(1 + 2e9 * kSearchSecondsPerAction / 2));
}

TEST_CASE("search_plans: a search whose remaining candidates exceed its time limit stops with the estimate") {
  Scenario s = base(1536);
  SearchSpace space;
  space.gpus = 64;
  space.tp = 8;
  space.schedules = {"1f1b"};
  space.recomputes = {Recompute::Full};
  AnalyticCostModel cost;
  SearchOptions o;
  o.threads = 1;
  // A tenth of 10 ms is 33,333 actions at 0.3 us: the first candidate passes it, the others are left.
  o.time_limit_s = 0.01;
  const std::string message = bad_input([&] { search_plans(s, space, cost, o); });
  CHECK(message.starts_with("plan: after "));
  CHECK(message.find(" and 1 configurations (") != std::string::npos);
  CHECK(message.find("fewer than 5 plans scored to bound them) would take about ") != std::string::npos);
  CHECK(message.ends_with("; the limit is 10 ms; narrow the space (--tp, --pp, --micro-batch-size, --schedules, "
                          "--recompute), lower --global-batch-size or pass --allow-large"));
  o.time_limit_s = 600;
  CHECK_FALSE(search_plans(s, space, cost, o).plans.empty());
}

TEST_CASE("enumerate_candidates: with fused attention selective recompute is none's twin and is left out unless asked") {
  SearchSpace space;
  space.gpus = 8;
  space.tp = 8;
  space.schedules = {"1f1b"};
  const auto has_selective = [](const std::vector<Candidate>& cs) {
    return std::any_of(cs.begin(), cs.end(), [](const Candidate& c) { return c.recompute == Recompute::Selective; });
  };
  Scenario s = base(16);
  CHECK_FALSE(has_selective(enumerate_candidates(s, space)));
  s.workload.flash_attention = false;
  CHECK(has_selective(enumerate_candidates(s, space)));
  s.workload.flash_attention = true;
  space.recomputes = {Recompute::Selective};
  CHECK(has_selective(enumerate_candidates(s, space)));
}
