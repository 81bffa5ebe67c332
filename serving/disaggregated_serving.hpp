#pragma once
// Disaggregated serving: a prefill pool computes each prompt and its first token, the prompt's KV cache goes
// over the link to a decode pool, which decodes the rest (vLLM's and SGLang's prefill/decode disaggregation).
// The pools are engines of their own (serving/serving_sim.hpp), each with replicas; a prefill pool's request asks
// for its first token only, a decode pool's arrives prefilled (ServingRequest::prefilled) when its cache has
// arrived. The pools only meet through those arrivals, so simulating the prefill pool first and the decode
// pool on its results is exact for arrivals that do not depend on finishes (a closed loop does: refused).
#include <vector>

#include "serving/serving_replicas.hpp"
#include "serving/serving_sim.hpp"

namespace pw {

struct ServingPool {
  ServingConfig engine;  // tp, pp and the scheduler's limits of each replica
  int replicas = 1;
  // > 1: each replica is a group of this many data-parallel attention engines of tp GPUs (pp 1), the experts spread
  // over the group (serving/dp_attention_serving.hpp), as SGLang's wide-EP pools run.
  int dp_attention = 1;
  int gpus() const { return engine.tp * engine.pp * dp_attention * replicas; }
};

struct DisaggregatedResult {
  ServingResult served;           // each request: its arrival, first token (prefill pool), last token (decode pool)
  ServingResult prefill, decode;  // each pool's own (the decode pool's arrivals are the caches' arrivals)
  double kv_transfer_s = 0;       // the mean per request
  LinkSpec kv_link;               // between the pools' first GPUs
};

// The seconds a prompt's KV cache takes from one pool to the other: latency + bytes / bandwidth of the link
// between the pools, as many GPU pairs sending at once as the smaller engine has GPUs (each sends its own
// shard of heads and layers; with data-parallel attention a request's cache is on one engine of tp GPUs).
double kv_transfer_time(const Model& model, long prompt_tokens, const ServingPool& prefill, const ServingPool& decode,
                        const LinkSpec& link);

// The prefill pool alone: each request's first token (its output_tokens taken as 1). BadInput for a closed loop.
ServingResult simulate_prefill_pool(const Model& model, const Cluster& cluster, const CostModel& cost,
                                    const ServingPool& prefill, const std::vector<ServingRequest>& requests);

// A pool's replicas (or groups of data-parallel attention engines) serving `requests`, every replicas-th each.
ServingResult simulate_pool(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingPool& pool,
                            const std::vector<ServingRequest>& requests);

// The decode pool after the prefill pool's `prefilled` result (a planner tries several decode pools on one).
DisaggregatedResult simulate_decode_pool(const Model& model, const Cluster& cluster, const CostModel& cost,
                                         const ServingPool& prefill, const ServingResult& prefilled,
                                         const ServingPool& decode, const std::vector<ServingRequest>& requests);

// What simulate_decode_pool's served requests cannot beat (serving/serving_replicas.hpp, serving_floor, over the
// decode pool's requests as they arrive from the prefill pool: its first tokens and every request of two or more
// outputs, in order), for a decode pool of single engines (a data-parallel attention group's step waits on every
// engine's batch, which one request alone does not bound: BadInput).
ServingFloor decode_pool_floor(const Model& model, const Cluster& cluster, const CostModel& cost,
                               const ServingPool& prefill, const ServingResult& prefilled, const ServingPool& decode,
                               const std::vector<ServingRequest>& requests);

// Both: the prefill pool on the cluster's first GPUs, the decode pool on the ones after. BadInput for a closed loop,
// pools wider than the cluster, and anything either engine refuses.
DisaggregatedResult simulate_disaggregated(const Model& model, const Cluster& cluster, const CostModel& cost,
                                           const ServingPool& prefill, const ServingPool& decode,
                                           const std::vector<ServingRequest>& requests);

}  // namespace pw
