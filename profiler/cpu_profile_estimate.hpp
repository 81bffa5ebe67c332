#pragma once
// What `profile` on the CPU takes, from the model's shape before anything is allocated (the bounds of
// core/work_estimate.hpp): a 70B model's block at 8,192 tokens is an hour of one core per run.
#include <vector>

#include "core/model.hpp"
#include "core/work_estimate.hpp"
#include "profiler/core_speed.hpp"
#include "profiler/cpu_profiler.hpp"

namespace pw {

// The parts: memory "the float32 tensors of the embedding, one block and the head of llama3-70b (...)",
// the one-block model's weights and gradients, every measured layer's input and output gradient at every
// micro-batch size (all made before the first run), the activations one run keeps, and the optimizer's
// timing state (at most 256 MiB); time "initialising P parameters and N or more runs of ...", each
// layer's F, B and W FLOPs at each micro-batch size times the runs the repetition rules make at least
// (warm-up, one untimed run per round, the minimum of timed ones) at `core`'s FLOP/s, after a random draw
// for every parameter at its draws a second (`core`: this machine's, profiler/core_speed.hpp). Both are
// short of what the profile takes, never above. Fix: "lower --seq-len or --micro-batch-size, or profile with
// --backend cuda".
std::vector<WorkEstimate> cpu_profile_estimate(const Model& model, const CpuProfileRequest& request, const CoreSpeed& core);

}  // namespace pw
