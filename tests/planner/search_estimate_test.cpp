// The search's estimate before work, and the divisor loop that used to overflow at 2^31 - 1.
#include <catch2/catch.hpp>

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
