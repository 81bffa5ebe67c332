#pragma once
// Replicas of one serving engine, each on its own GPUs, each taking every replicas-th request (vLLM's data
// parallelism behind a round-robin front end) and a closed loop's concurrency split among them.
#include <functional>
#include <vector>

#include "serving/serving_sim.hpp"

namespace pw {

// Copy r of `copies`: its requests (every copies-th from r, in order) and its share of a closed loop's
// concurrency (0 stays 0: open arrivals).
std::vector<ServingRequest> dealt_to(const std::vector<ServingRequest>& requests, int r, int copies);
int concurrency_share(int concurrency, int r, int copies);

// The replicas' requests together, in the order given; makespan the latest, preemptions summed,
// kv_capacity_tokens one engine's (the nodes are alike, so replica 0's place stands for all), stage_busy_s each
// stage's mean over the replicas, max_running and peak_kv_use the largest engine's.
// Adds engine r's result (its requests every engines-th of the whole, from r) to `all`, as simulate_replicas
// gathers them; its batches are the caller's to count, and its token gaps the caller's to settle once every engine
// is in.
void merge_engine_result(ServingResult& all, const ServingResult& one, size_t r, size_t engines);

// Copies of any served unit (an engine, a data-parallel attention group), each taking every copies-th request
// and its share of a closed loop, simulated by `one` and gathered; batches summed.
using ServingUnit = std::function<ServingResult(const ServingConfig&, const std::vector<ServingRequest>&)>;
ServingResult simulate_copies(const ServingConfig& engine, int copies, const std::vector<ServingRequest>& requests,
                              const ServingUnit& one);

ServingResult simulate_replicas(const Model& model, const Cluster& cluster, const CostModel& cost, ServingConfig engine,
                                int replicas, const std::vector<ServingRequest>& requests);

// What no number of copies of `engine` can beat on `requests`: each request's outputs after the first come at
// least ServingEngine::token_gap_floor_s apart at its shortest decode context, so its time per output token is
// no less and its last token comes no earlier than its arrival (0 in a closed loop) plus those gaps; the makespan
// no earlier than the latest of these. Nothing known (a makespan of 0) where the cost model cannot promise that
// a larger step takes no less (CostModel::serving_time_monotone) or the engine cannot hold a KV cache (its
// simulation says why).
struct ServingFloor {
  double makespan_s = 0;
  std::vector<double> token_gap_s;  // per request of two or more outputs, in order
};
ServingFloor serving_floor(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingConfig& engine,
                           const std::vector<ServingRequest>& requests);

}  // namespace pw
