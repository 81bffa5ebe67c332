// The serving search's jobs (planner/serving_jobs.hpp): refused jobs skipped in order and not counted, and the time
// limit held while the jobs run, checked once the leaders hold their --top plans.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/error.hpp"
#include "planner/serving_jobs.hpp"

using namespace pw;

namespace {

// `count` jobs of one layer-step each whose simulation sleeps `sleep_s` and serves 100 - i tokens a second.
std::vector<ServingJob> sleeping_jobs(int count, double sleep_s, std::atomic<int>& simulated) {
  std::vector<ServingJob> jobs;
  for (int i = 0; i < count; ++i)
    jobs.push_back({fmt::format("job {}", i),
                    [i, sleep_s, &simulated] {
                      ++simulated;
                      std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
                      ServingPlan p;
                      p.metrics.output_tokens_per_s = 100 - i;
                      return p;
                    },
                    {},
                    1.0,
                    {}});
  return jobs;
}

const std::vector<ServingRequest> kJobRequests(4, ServingRequest{0.0, 16, 8});

std::string refusal_of(int top, int threads) {
  std::atomic<int> simulated{0};
  ServingLeaders leaders(top, {}, kJobRequests);
  ServingPlanResult out;
  try {
    run_serving_jobs(sleeping_jobs(50, 0.15, simulated), threads, leaders, out, ServingTimeLimit{1.0});
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(simulated.load() < 50);  // the search stopped there
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("serving jobs: a job refused before simulation is skipped with its reason, in order, and not considered") {
  std::atomic<int> simulated{0};
  std::vector<ServingJob> jobs = sleeping_jobs(2, 0, simulated);
  jobs.insert(jobs.begin() + 1, ServingJob{"prefill pool tp 1, pp 1 x 4", {}, {}, 0, "it does not fit"});
  jobs[2].simulate = [] () -> ServingPlan { throw_bad_input("too long"); };
  ServingLeaders leaders(5, {}, kJobRequests);
  ServingPlanResult out;
  run_serving_jobs(jobs, 2, leaders, out, ServingTimeLimit{600});
  CHECK(out.considered == 2);
  CHECK(out.simulated == 2);
  REQUIRE(out.plans.size() == 1);
  CHECK(out.skipped == std::vector<std::string>{"prefill pool tp 1, pp 1 x 4: it does not fit", "job 1: too long"});
}

TEST_CASE("serving jobs: past the time limit the search stops with what is left, once the leaders hold --top plans") {
  const std::string suffix =
      "; the limit is 1 s; plan fewer GPUs (--gpus), fewer requests or leave out --disaggregate or pass --allow-large";
  // Top 1, one thread: after the first job (0.15 s, past a tenth of the 1 s limit) 49 jobs of 0.15 s are left.
  std::string top1 = refusal_of(1, 1);
  CHECK(top1.rfind("serve plan: 49 of 50 configurations that could still rank, about 49 simulated layer-steps would take about ", 0) == 0);
  CHECK(top1.size() > suffix.size());
  CHECK(top1.substr(top1.size() - suffix.size()) == suffix);
  // Top 3: nothing can be dropped before three plans are in, so the check waits for them.
  const std::string top3 = refusal_of(3, 1);
  CHECK(top3.rfind("serve plan: 47 of 50 configurations that could still rank", 0) == 0);
  // On two threads it stops too.
  CHECK(refusal_of(1, 2).rfind("serve plan: ", 0) == 0);
}

TEST_CASE("serving jobs: within the time limit the result is the one without it") {
  std::atomic<int> simulated{0};
  ServingLeaders with_leaders(3, {}, kJobRequests), without_leaders(3, {}, kJobRequests);
  ServingPlanResult with, without;
  run_serving_jobs(sleeping_jobs(20, 0, simulated), 2, with_leaders, with, ServingTimeLimit{600});
  run_serving_jobs(sleeping_jobs(20, 0, simulated), 2, without_leaders, without);
  CHECK(with.considered == 20);
  REQUIRE(with.plans.size() == without.plans.size());
  for (size_t i = 0; i < with.plans.size(); ++i)
    CHECK(with.plans[i].metrics.output_tokens_per_s == without.plans[i].metrics.output_tokens_per_s);
}
