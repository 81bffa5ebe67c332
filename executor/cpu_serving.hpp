#pragma once
// Serving for real on the CPU backend: one thread per pipeline stage, each holding its layers' KV cache, runs
// the serving simulator's batches (ServingResult::steps) in the same order, with the same bound of pp batches
// in flight. A batch starts on the first stage when its requests have arrived (a closed loop: when the request
// it replaces finished) and their previous batch has left the last stage, which samples each next token
// greedily; the hidden states pass from stage to stage in order. It measures what the simulator predicts:
// each request's arrival, first and last token, and each stage's busy time.
#include <cstdint>
#include <vector>

#include "core/model.hpp"
#include "core/serving_steps.hpp"
#include "core/stage_costs.hpp"
#include "serving/serving_sim.hpp"

namespace pw {

struct CpuServingRun {
  ServingResult measured;                  // requests, makespan_s, batches, stage_busy_s
  std::vector<std::vector<int>> outputs;   // each request's generated tokens
  double peak_kv_bytes = 0;                // the largest stage's float32 KV cache
};

// One hand-over between stage threads as the runtime makes it (a matrix moved through a queue, the receiver
// spinning a while before it sleeps where each thread has a core): the median of `round_trips` ping-pongs,
// halved. What a batch's hidden states, and the sampled tokens coming back, cost to pass between stages.
double stage_handover_s(int round_trips);

// The prompt of request r: tokens drawn from `seed` and r, deterministic.
std::vector<int> serving_prompt(std::uint64_t seed, long request, long tokens, long vocab);

// Runs `steps` over `stages` of `model` (weights from `seed`). `concurrency` > 0: a closed loop as in
// ServingConfig; 0: requests arrive at their arrival_s after the start. BadInput for models the CPU backend
// cannot run and for steps that do not fit the requests; Runtime when a stage fails.
CpuServingRun serve_on_cpu(const Model& model, const std::vector<LayerRange>& stages,
                           const std::vector<ServingStep>& steps, const std::vector<ServingRequest>& requests,
                           int concurrency, std::uint64_t seed);

}  // namespace pw
