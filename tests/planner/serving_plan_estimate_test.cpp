// serve plan's estimate (planner/serving_plan_estimate.hpp): a pool's steps in closed form, and the search's
// candidates counted as the planner tries them.
#include <catch2/catch.hpp>

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
  const WorkEstimate one = serving_plan_estimate(m, cluster, 8, false, same_engine(ServingConfig{}), requests);
  // tp 1, 2, 4, 8 with every pp dividing the rest: 4 + 3 + 2 + 1 shapes.
  CHECK(one.work.rfind("10 configurations of 8 GPUs x 8 requests, about ", 0) == 0);
  CHECK(one.seconds > 0);
}
