// serve plan's estimate (planner/serving_plan_estimate.hpp): a pool's steps in closed form, and the search's
// candidates counted as the planner tries them.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/cluster.hpp"
#include "core/model.hpp"
#include "planner/serving_plan_estimate.hpp"

using namespace pw;

TEST_CASE("serving estimate: a pool's steps are its outputs over the batch each engine holds, plus the prompt chunks") {
  ServingConfig c;
  c.max_num_batched_tokens = 1000;
  const std::vector<ServingRequest> requests(100, ServingRequest{0.0, 2500, 64});
  const ServingLoad load = serving_load(requests, c);
  CHECK(load.requests == 100);
  CHECK(load.outputs == 6400);
  CHECK(load.prompt_chunks == 300);  // 2,500 tokens in chunks of 1,000
  // One engine holding all 100: 6,400 / 100 decode steps; 4 engines of 25 each: 6,400 / 25; a batch is at most
  // max_num_seqs, and at least one.
  CHECK(pool_steps(load, 1, 256) == 64 + 300);
  CHECK(pool_steps(load, 4, 256) == 256 + 300);
  CHECK(pool_steps(load, 1, 10) == 640 + 300);
  CHECK(pool_steps(load, 1000, 256) == 6400 + 300);
  CHECK(pool_steps(load, 4, 256, true) == 300);
  c.chunked_prefill = false;
  CHECK(serving_load(requests, c).prompt_chunks == 100);
}

TEST_CASE("serving estimate: the configurations are the planner's own") {
  const Model m = model_preset("llama3-8b");
  const Cluster cluster = cluster_preset("dgx-h100");
  const std::vector<ServingRequest> requests(8, ServingRequest{0.0, 100, 10});
  const WorkEstimate all = serving_plan_estimate(m, cluster, 8, false, 0, same_engine(ServingConfig{}), requests);
  // tp 1, 2, 4, 8 with every pp dividing the rest: 4 + 3 + 2 + 1 shapes.
  CHECK(all.work.rfind("10 configurations of 8 GPUs x 8 requests, about ", 0) == 0);
  CHECK(all.seconds > 0);
}

TEST_CASE("serving estimate: the search is counted by the --top cheapest configurations, which it always simulates") {
  const Model m = model_preset("llama3-8b");
  const Cluster cluster = cluster_preset("dgx-h100");
  const ServingConfig engine;
  // 8 requests of 100 prompt tokens (one chunk each) and 10 outputs: an engine holding n of them takes 80 / n
  // decode steps and 8 prefill chunks, each step pricing every layer.
  const std::vector<ServingRequest> requests(8, ServingRequest{0.0, 100, 10});
  const double layers = static_cast<double>(m.layers.size());
  // The 10 shapes on 8 GPUs: 8 engines of one GPU (1 request each: 80 + 8 steps); 4 engines (2 each: 40 + 8) for
  // tp 1 pp 2 and tp 2 pp 1; ... a single engine of 8 GPUs (all 8: 10 + 8) for the 4 shapes of tp x pp 8.
  CHECK(serving_pool_work(m, engine, 8, requests) == (80 + 8) * layers);
  CHECK(serving_pool_work(m, engine, 1, requests) == (10 + 8) * layers);
  CHECK(serving_pool_work(m, engine, 1, requests, true) == 8 * layers);
  const WorkEstimate two = serving_plan_estimate(m, cluster, 8, false, 2, same_engine(engine), requests);
  CHECK(two.work == fmt::format("the 2 cheapest of 10 configurations of 8 GPUs x 8 requests, about 36 simulated steps of {} layers",
                                m.layers.size()));
  CHECK(two.seconds == Approx(2 * 18 * layers * kSecondsPerLayerStep).epsilon(1e-12));
  CHECK(two.fix == "plan fewer GPUs (--gpus), fewer requests or leave out --disaggregate");
  // Disaggregated: every prefill pool is simulated, whatever --top: pools of 2, 4 and 6 GPUs in 3, 6 and 6 shapes,
  // 8 chunks each (120 steps), and the cheapest configuration (18). Configurations: the 10 engines and each prefill
  // pool with each decode pool of the rest: 3 x 6 + 6 x 6 + 6 x 3.
  const WorkEstimate pools = serving_plan_estimate(m, cluster, 8, true, 1, same_engine(engine), requests);
  CHECK(pools.work == fmt::format("the prefill pools and the 1 cheapest of 82 configurations of 8 GPUs x 8 requests, about 138 "
                                  "simulated steps of {} layers",
                                  m.layers.size()));
}
