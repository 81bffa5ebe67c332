// The search's estimate before work, and the divisor loop that used to overflow at 2^31 - 1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "../error_text.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/layer_work.hpp"
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

TEST_CASE("search_space_estimate: the largest candidate times the threads, the cache, and every candidate's walk of the layers") {
  SearchSpace space;
  space.gpus = 16;
  const Scenario s = base(64);
  const std::vector<Candidate> all = enumerate_candidates(s, space);
  double most = 0, total = 0;
  const Candidate* largest = nullptr;
  std::set<LayerTableKey> tables;
  for (const Candidate& c : all) {
    total += candidate_actions(c);
    if (candidate_actions(c) > most) {
      most = candidate_actions(c);
      largest = &c;
    }
    tables.insert(layer_table_key(c));
  }
  REQUIRE(largest);
  CHECK(candidate_actions(Candidate{4, 2, 1, 1, 1, 1000, "1f1b"}) == 6000);
  CHECK(candidate_actions(Candidate{2, 2, 2, 2, 1, 500, "interleaved"}) == 6000);
  const std::vector<WorkEstimate> parts = search_space_estimate(s, space, 2);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].work == fmt::format("{} candidates, the largest {} actions ({}, {} micro-batches)", with_commas(static_cast<long>(all.size())),
                                     format_count(most), describe(*largest), largest->microbatches));
  CHECK(parts[0].bytes == Approx(2 * most * kSimBytesPerAction + std::min(total, 20e6) * 20));
  CHECK(parts[0].seconds == 0);
  const double layers = s.model.num_layers();
  CHECK(parts[1].bytes == Approx(all.size() * kSearchBytesPerCandidate +
                                 tables.size() * layers * (sizeof(LayerWork) + 6 * sizeof(double))));
  CHECK(parts[1].seconds == Approx(all.size() * layers * kSearchSecondsPerCandidateLayer / 2));
}

TEST_CASE("search_space_estimate: plan --global-batch-size 1000000000 is refused before any candidate is scored") {
  SearchSpace space;
  space.gpus = 8;
  const std::vector<WorkEstimate> parts = search_space_estimate(base(1000000000), space, 2);
  CHECK(bad_input([&] { check_work("plan", parts, WorkLimits{64e9, 600}); }).starts_with("plan: "));
  CHECK(parts[0].bytes > 1e12);
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
  // The check comes at the first candidate: a tenth of 1 ms has passed by then, the set-up before it (the
  // tables, the bounds) taking longer (a 10 ms limit left the count to the machine's speed: the set-up once
  // took more than 1 ms, and now takes less).
  o.time_limit_s = 0.001;
  const std::string message = bad_input([&] { search_plans(s, space, cost, o); });
  CHECK(message.starts_with("plan: after "));
  CHECK(message.find(" and 1 configurations (") != std::string::npos);
  CHECK(message.find("fewer than 5 plans scored to bound them) would take about ") != std::string::npos);
  CHECK(message.ends_with("; the limit is 1 ms; narrow the space (--tp, --pp, --micro-batch-size, --schedules, "
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
