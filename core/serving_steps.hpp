#pragma once
// The serving schedule as a list of batches: which sequences each forward iteration carries and which of
// their positions it computes. The serving simulator forms it (serving/serving_sim.hpp) and times it; the
// executor runs the same list (executor/cpu_serving.hpp), so the two never disagree on what was scheduled.
#include <vector>

namespace pw {

// One sequence's part of a batch: `tokens` positions after the `start` already in its KV cache (a decode:
// one; a prefill chunk: several; start 0 again after a preemption, whose recompute overwrites the cache).
struct SequenceChunk {
  long request = 0;
  long start = 0;
  long tokens = 0;
  bool samples = false;  // its last position's logits give the request's next token
  // A speculative decode: the last token and `tokens` - 1 drafted ones after it, every position's logits sampled
  // to accept a prefix of the drafts (serving/serving_sim.hpp, ServingConfig::speculative_tokens).
  bool verifies = false;

  bool operator==(const SequenceChunk&) const = default;
};

// One forward iteration's batch, its chunks in scheduling order.
using ServingStep = std::vector<SequenceChunk>;

}  // namespace pw
