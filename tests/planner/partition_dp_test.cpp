// The partitioner's programmes against what they stand for: the first start within a stage's cap against a
// scan of starts, the single best tied split against the head of the ranked list.
#include <catch2/catch.hpp>

#include <random>

#include "partition_test_util.hpp"
#include "planner/partition_dp.hpp"
#include "planner/partition_problem.hpp"
#include "schedules/generators.hpp"

using namespace pw;
using namespace pw::test;

namespace {

struct Instance {
  Scenario scenario;
  PartitionProblem problem;
};

Instance random_instance(std::mt19937& rng, const char* schedule, int pp, int vpp, int m) {
  const int stages = pp * vpp;
  const int n = std::uniform_int_distribution<int>(stages, 14)(rng);
  Scenario s = scenario_for(random_model(rng, n), exact_cluster(1e18), schedule, pp, vpp, m);
  const Schedule order = make_schedule(schedule_spec(s));
  PartitionProblem p = make_partition_problem(s, exact_cost(), order);
  return Instance{std::move(s), std::move(p)};
}

bool same(const std::vector<LayerRange>& a, const std::vector<LayerRange>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].last != b[i].last) return false;
  return true;
}

// Caps between a tenth and the whole of what each stage would need holding every layer, so that the first
// start that fits moves with the end.
std::vector<double> random_caps(std::mt19937& rng, const PartitionProblem& p) {
  std::vector<double> cap;
  for (int s = 0; s < p.stages; ++s)
    cap.push_back(p.stage_memory(s, 0, p.layers) * std::uniform_real_distribution<double>(0.1, 1.0)(rng));
  return cap;
}

}  // namespace

TEST_CASE("a stage's first start within its cap is where a scan of starts from its end stops") {
  std::mt19937 rng(20261202);
  int moved = 0;
  for (const auto& [schedule, pp, vpp] : {std::tuple{"1f1b", 3, 1}, std::tuple{"interleaved", 2, 2},
                                          std::tuple{"zb-v", 2, 2}, std::tuple{"zb-h1", 4, 1}}) {
    for (int trial = 0; trial < 20; ++trial) {
      const Instance in = random_instance(rng, schedule, pp, vpp, 2 * pp * vpp);
      const PartitionProblem& p = in.problem;
      const std::vector<double> cap = random_caps(rng, p);
      const std::vector<int> lowest = lowest_starts(p, cap);
      const size_t width = static_cast<size_t>(p.layers) + 1;
      for (int s = 0; s < p.stages; ++s)
        for (int i = s + 1; i <= p.layers - (p.stages - 1 - s); ++i) {
          // The scan the programmes ran before: from the stage's last layer back while the memory fits.
          int first = i;
          for (int j = i - 1; j >= (s == 0 ? 0 : s); --j) {
            if (p.stage_memory(s, j, i) > cap[static_cast<size_t>(s)]) break;
            first = j;
          }
          const int found = lowest[static_cast<size_t>(s) * width + static_cast<size_t>(i)];
          INFO(schedule << " stage " << s << " end " << i);
          // Below the stage's earliest start every start counts as fitting: only the scanned ones matter.
          CHECK(std::max(found, s == 0 ? 0 : s) == first);
          if (first > (s == 0 ? 0 : s) && first < i) ++moved;
        }
    }
  }
  CHECK(moved > 100);  // the caps bind inside the scans, not only at their ends
}

TEST_CASE("the single best split within a limit is the head of the ranked list, with the same count") {
  std::mt19937 rng(7);
  int checked = 0;
  for (const auto& [schedule, pp, vpp] : {std::tuple{"1f1b", 3, 1}, std::tuple{"interleaved", 2, 2},
                                          std::tuple{"gpipe", 4, 1}}) {
    for (int trial = 0; trial < 20; ++trial) {
      const Instance in = random_instance(rng, schedule, pp, vpp, 2 * pp * vpp);
      const PartitionProblem& p = in.problem;
      const std::vector<double> cap = trial % 2 ? random_caps(rng, p) : rank_caps(p);
      const Split least = min_bottleneck(p, cap);
      if (least.ranges.empty()) continue;
      // A limit above the least bottleneck, so that several splits pass.
      const double limit = least.value * std::uniform_real_distribution<double>(1.0, 1.3)(rng);
      double one_count = 0, list_count = 0;
      const auto one = best_splits_within(p, cap, limit, 1, &one_count);
      const auto list = best_splits_within(p, cap, limit, 8, &list_count);
      INFO(schedule << " trial " << trial);
      REQUIRE(one.size() == 1);
      REQUIRE_FALSE(list.empty());
      CHECK(same(one.front(), list.front()));
      CHECK(one_count == list_count);
      // Precomputed first starts change nothing.
      const std::vector<int> lowest = lowest_starts(p, cap);
      CHECK(same(best_splits_within(p, cap, limit, 1, nullptr, &lowest).front(), one.front()));
      CHECK(same(min_bottleneck(p, cap, &lowest).ranges, least.ranges));
      ++checked;
    }
  }
  CHECK(checked > 40);
}
