#pragma once
// The CPU profiler's serving part: each distinct layer of a model timed in serving batches of the shapes a
// workload brings (prefill chunks, decodes of many sequences over long contexts, both together), on the
// KV-cached forward the executor serves with, and the rates fitted to them (profiler/serving_rates.hpp).
#include <functional>
#include <vector>

#include "core/model.hpp"
#include "core/work_estimate.hpp"
#include "profiler/profile.hpp"
#include "profiler/repeat.hpp"
#include "profiler/serving_rates.hpp"

namespace pw {

// The batch shapes timed: `batches` when given (a workload's own, as the simulator formed them); otherwise
// prefill chunks of 8 tokens up to `max_batched_tokens`, decodes of 1 up to `max_seqs` sequences at contexts
// up to `max_context`, and a chunk beside decodes; each a power of two, capped by the model's positions where
// they are learned.
struct ServingProfileRequest {
  long max_batched_tokens = 512;
  int max_seqs = 64;
  long max_context = 1024;
  std::vector<ServingStep> batches;
  int busy_threads = 0;  // threads serving the same batches meanwhile (a run's other stages)
  ProfileOptions options;
  // Runs after each of options.rounds turns, the busy threads stopped: a run measured in the same turns.
  std::function<void()> after_round;
};

// Up to `count` of `steps`, evenly spaced from the first to the last: the batches a workload brings, for
// ServingProfileRequest::batches.
std::vector<ServingStep> sample_steps(const std::vector<ServingStep>& steps, int count);

// BadInput for models the CPU backend cannot run.
ServingProfile profile_cpu_serving(const Model& model, const ServingProfileRequest& request);

// The float32 weights the serving profile holds: per kind of layer as many copies as the model has of it (up
// to 16), for the timing thread and each busy thread.
WorkEstimate cpu_serving_profile_estimate(const Model& model, int busy_threads);

// A whole profile for serving: the tool, the machine, the model, the serving rates and the link between
// stages: the serving runtime's hand-over (executor/cpu_serving.hpp), its matrices moved, not copied.
Profile profile_cpu_for_serving(const Model& model, const ServingProfileRequest& request);

// The request `serve run` measures with when it is given no profile: the workload's own batches, a few
// repetitions each, well under a second on the tiny examples.
ServingProfileRequest quick_serving_request(std::vector<ServingStep> batches, int busy_threads);

}  // namespace pw
