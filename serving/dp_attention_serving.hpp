#pragma once
// Data-parallel attention with expert parallelism ("wide EP": SGLang's --enable-dp-attention with --ep-size,
// vLLM's --data-parallel-size with --enable-expert-parallel): dp engines of tp GPUs each prefill and decode
// their own requests with their own scheduler and KV cache (attention and the dense layers on their own
// batch), while every MoE layer's routed experts spread whole over all dp x tp GPUs (ep = dp x tp, experts /
// ep each), which receive the copies of every engine's tokens.
//
// Every MoE layer is a barrier (its dispatch all-to-all waits for every engine), so the engines step in
// lockstep, one stage each (pp 1): when any engine has work, all run a step (an idle one an empty batch, as
// both frameworks run a dummy forward), and the step takes, layer by layer, the slowest engine's time (its
// attention and dense work, the experts' GEMMs on every engine's tokens that reach this GPU, which are alike
// on all GPUs at the balanced routing the model assumes) plus, for a MoE layer, the dispatch and combine
// all-to-alls of the busiest engine's GPU (its tokens / tp, top_k copies each, over the ep group's links).
// Requests go to the engines in turn, as SGLang's default --load-balance-method round_robin sends them (the
// i-th to engine i mod dp), and a closed loop's concurrency is split among them. With speculative decoding each
// step first runs the draft's K steps at every engine's verifying decodes, in lockstep too.
#include <vector>

#include "serving/serving_sim.hpp"

namespace pw {

// BadInput for a model without routed experts, pp > 1, dp < 2, or expert slots that dp x tp does not divide, and
// for whatever an engine refuses (weights that leave no KV cache, a request larger than it).
ServingResult simulate_dp_attention(const Model& model, const Cluster& cluster, const CostModel& cost,
                                    const ServingConfig& engine, int dp, const std::vector<ServingRequest>& requests);

// `groups` such groups, each on its own dp x tp GPUs, each taking every groups-th request (and its share of a
// closed loop), as replicas do (serving/serving_replicas.hpp). The groups are alike, so group 0's links stand for all.
ServingResult simulate_dp_attention_groups(const Model& model, const Cluster& cluster, const CostModel& cost,
                                           const ServingConfig& engine, int dp, int groups,
                                           const std::vector<ServingRequest>& requests);

// One lockstep step's time for the engines' batches (an empty batch for an idle engine), after the draft's
// speculative_tokens steps at the decodes each engine verifies (`drafts`: draft_batch of each engine's step; none
// without speculative decoding).
double dp_attention_step_time(const Model& model, const Cluster& cluster, const CostModel& cost,
                              const ServingConfig& engine, const std::vector<ServingBatch>& batches,
                              const std::vector<ServingBatch>& drafts = {});

}  // namespace pw
