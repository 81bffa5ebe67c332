#pragma once
// serve plan's time: what simulating a configuration takes (the steps its engines take, each pricing every
// layer), and what the search takes whatever it drops (planner/serving_leaders.hpp): its prefill pools and the
// `top` cheapest configurations, which are simulated before any can be dropped. A search of thousands of
// engines is refused up front only where that much already passes the limit; the rest is held to the limit
// while it runs (planner/serving_jobs.hpp).
#include <string>
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

// Simulating `replicas` engines like `engine` on the requests, in layer-steps (a step pricing one layer).
double serving_pool_work(const Model& model, const ServingConfig& engine, int replicas,
                         const std::vector<ServingRequest>& requests, bool prefill_only = false);

// The layer-steps and seconds `serve plan` with these options takes whatever it drops (above); `top` 0: every
// configuration.
WorkEstimate serving_plan_estimate(const Model& model, const Cluster& cluster, int gpus, bool disaggregate, int top,
                                   const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests);

// Seconds a simulated step takes per layer it prices (this VM, docs/reliability.md).
inline constexpr double kSecondsPerLayerStep = 1e-7;

// What a user can do about a serve plan search too long for the limit.
inline constexpr const char* kServingPlanFix = "plan fewer GPUs (--gpus), fewer requests or leave out --disaggregate";

}  // namespace pw
