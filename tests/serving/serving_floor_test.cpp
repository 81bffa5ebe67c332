// What no serving run can beat (serving/serving_replicas.hpp, serving_floor): a lone request's gap between two
// tokens is the floor at its context, and over varied workloads, engines and shapes no simulated request's time
// per output token and no makespan comes under its floor.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "serving/disaggregated_serving.hpp"
#include "serving/engine_profile.hpp"
#include "serving/serving_replicas.hpp"
#include "serving/serving_workload.hpp"

using namespace pw;

namespace {

struct FloorSetup {
  Model model = model_preset("llama3-8b");
  Cluster cluster = cluster_preset("dgx-h100");
  AnalyticCostModel cost;
};

ServingConfig floor_engine(const FloorSetup& x, const std::string& name, int tp, int pp) {
  ServingConfig c;
  c.tp = tp;
  c.pp = pp;
  c.apply(engine_profile(name, "", x.model, x.cluster.gpu_at(0), tp, pp));
  return c;
}

std::vector<ServingRequest> floor_workload(long requests, double rate, std::uint64_t seed) {
  WorkloadSpec w;
  w.prompt = parse_length("uniform:16:3000", "--prompt-tokens");
  w.output = parse_length("uniform:1:300", "--output-tokens");
  w.requests = requests;
  w.rate_per_s = rate;
  w.seed = seed;
  return make_requests(w);
}

// Every served request of two or more outputs at or over its gap (in order), and the makespan at or over the floor.
void check_over_floor(const ServingFloor& floor, const ServingResult& run) {
  REQUIRE(floor.makespan_s > 0);
  size_t k = 0;
  for (const ServedRequest& q : run.requests) {
    if (q.output_tokens < 2) continue;
    REQUIRE(k < floor.token_gap_s.size());
    const double tpot = (q.last_token_s - q.first_token_s) / static_cast<double>(q.output_tokens - 1);
    CHECK(tpot >= floor.token_gap_s[k++] * (1 - 1e-12));
  }
  CHECK(k == floor.token_gap_s.size());
  CHECK(run.makespan_s >= floor.makespan_s * (1 - 1e-12));
}

}  // namespace

TEST_CASE("a lone request's second token comes one floor after its first, at tp 2 and pp 2") {
  const FloorSetup x;
  ServingConfig c;
  c.tp = 2;
  c.pp = 2;
  const std::vector<ServingRequest> one{{0.0, 1000, 2}};
  const ServingResult run = simulate_serving(x.model, x.cluster, x.cost, c, one);
  const ServingFloor floor = serving_floor(x.model, x.cluster, x.cost, c, one);
  REQUIRE(floor.token_gap_s.size() == 1);
  CHECK(run.requests[0].last_token_s - run.requests[0].first_token_s == Approx(floor.token_gap_s[0]).epsilon(1e-12));
  // Its floor is its arrival and that one gap: the prefill's time is not counted.
  CHECK(floor.makespan_s == floor.token_gap_s[0]);
  CHECK(run.makespan_s > floor.makespan_s);
}

TEST_CASE("no simulated run beats its floor: engines, shapes, arrivals and the decode pool") {
  const FloorSetup x;
  for (const std::string name : {"vllm", "sglang", "trtllm"})
    for (const auto& [tp, pp] : {std::pair{1, 1}, std::pair{2, 2}, std::pair{8, 1}, std::pair{1, 4}})
      for (const double rate : {0.0, 40.0}) {
        INFO(name << " tp " << tp << " pp " << pp << " rate " << rate);
        const ServingConfig c = floor_engine(x, name, tp, pp);
        const std::vector<ServingRequest> requests = floor_workload(120, rate, static_cast<std::uint64_t>(tp * 10 + pp));
        check_over_floor(serving_floor(x.model, x.cluster, x.cost, c, requests),
                    simulate_replicas(x.model, x.cluster, x.cost, c, 3, requests));
      }
  SECTION("eager, a closed loop and a small cache that preempts") {
    ServingConfig c = floor_engine(x, "vllm", 1, 1);
    c.eager = true;
    c.launch_s = kEagerLaunchSeconds;
    c.concurrency = 16;
    c.gpu_memory_utilization = 0.235;
    const std::vector<ServingRequest> requests = floor_workload(100, 0, 7);
    const ServingResult run = simulate_replicas(x.model, x.cluster, x.cost, c, 2, requests);
    CHECK(run.preemptions > 0);
    check_over_floor(serving_floor(x.model, x.cluster, x.cost, c, requests), run);
  }
  SECTION("a decode pool after a prefill pool") {
    ServingPool prefill, decode;
    prefill.engine = floor_engine(x, "vllm", 2, 1);
    prefill.replicas = 2;
    decode.engine = floor_engine(x, "vllm", 4, 2);
    decode.replicas = 2;
    const std::vector<ServingRequest> requests = floor_workload(150, 30, 3);
    const ServingResult prefilled = simulate_prefill_pool(x.model, x.cluster, x.cost, prefill, requests);
    check_over_floor(decode_pool_floor(x.model, x.cluster, x.cost, prefill, prefilled, decode, requests),
                simulate_decode_pool(x.model, x.cluster, x.cost, prefill, prefilled, decode, requests).served);
  }
}

TEST_CASE("no floor from a cost model that does not promise a larger step takes no less") {
  const FloorSetup x;
  struct Measured : CostModelOver {
    using CostModelOver::CostModelOver;
    std::string name() const override { return "measured"; }
    bool serving_time_monotone() const override { return false; }
  };
  const Measured measured(x.cost);
  const ServingConfig c = floor_engine(x, "vllm", 1, 1);
  CHECK(serving_floor(x.model, x.cluster, x.cost, c, floor_workload(10, 0, 1)).makespan_s > 0);
  const ServingFloor none = serving_floor(x.model, x.cluster, measured, c, floor_workload(10, 0, 1));
  CHECK(none.makespan_s == 0);
  CHECK(none.token_gap_s.empty());
  // A model over the analytic one that changes nothing promises what it does.
  struct Over : CostModelOver {
    using CostModelOver::CostModelOver;
    std::string name() const override { return "over"; }
  };
  CHECK(Over(x.cost).serving_time_monotone());
}
