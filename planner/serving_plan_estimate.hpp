#pragma once
// serve plan's time before its search: every candidate it will simulate (the engine shapes, data-parallel
// attention groups, prefill and decode pools), each priced by the steps its engines take and the layers each
// step prices, so that a search of thousands of engines is refused up front with the count that makes it.
#include <vector>

#include "core/work_estimate.hpp"
#include "planner/serving_plan.hpp"

namespace pw {

// What the requests ask of a pool, whatever its shape.
struct ServingLoad {
  double requests = 0, outputs = 0, prompt_chunks = 0;  // the chunks at the engine's token budget
};
ServingLoad serving_load(const std::vector<ServingRequest>& requests, const ServingConfig& engine);

// The steps `replicas` engines take between them: each its share of the output tokens over the batch it holds
// (its requests, at most max_num_seqs) and its prompts' chunks (prefill only: chunks alone).
double pool_steps(const ServingLoad& load, int replicas, int max_num_seqs, bool prefill_only = false);

// The search's simulated layer-steps and seconds, as `serve plan` with these options would run them.
WorkEstimate serving_plan_estimate(const Model& model, const Cluster& cluster, int gpus, bool disaggregate,
                                   const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests);

// Seconds a simulated step takes per layer it prices (this VM, docs/reliability.md).
inline constexpr double kSecondsPerLayerStep = 1e-7;

}  // namespace pw
