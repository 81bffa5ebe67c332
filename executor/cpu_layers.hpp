#pragma once
// The layers of a decoder-only transformer on the CPU, in float32: embedding, block, head (final norm,
// LM head and cross-entropy). Each layer runs forward (F), backward-input (B) and hands its
// weight-gradient work to a sink: run at once (fused BW) or kept in the layer's context until the
// backward-weight (W) of that micro-batch.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/model.hpp"
#include "core/serving_steps.hpp"
#include "core/workload.hpp"
#include "executor/backend.hpp"
#include "executor/cpu_kv_cache.hpp"
#include "executor/cpu_ops.hpp"
#include "executor/cpu_tensor.hpp"

namespace pw {

// One micro-batch of token ids: `batch` sequences of `seq` tokens, and the token that follows each.
struct MicroBatch {
  int batch = 0;
  int seq = 0;
  std::vector<int> tokens;   // batch x seq, sequence-major
  std::vector<int> targets;  // the next token of each position
};

// The weight-gradient work of one parameterised op of one micro-batch: what B leaves for W.
struct WeightGradTerm {
  enum class Kind { Linear, Norm, Embedding };
  Kind kind = Kind::Linear;
  Mat input;                // Linear: the op's input; Norm: the normalised input (x-hat)
  Mat grad;                 // gradient of the op's output
  std::vector<int> tokens;  // Embedding: the token id of each row of `grad`
  int seq = 0;              // Embedding: sequence length (row r is position r % seq)
  Param* weight = nullptr;  // Linear: w; Norm: gamma; Embedding: the token table
  Param* bias = nullptr;    // Linear: b; Norm: beta; Embedding: the position table; null when absent

  double bytes() const { return bytes_of(input) + bytes_of(grad) + 4.0 * static_cast<double>(tokens.size()); }
};

// Adds the term's weight gradients into its parameters' `grad`.
void apply(const WeightGradTerm& term);

// What a layer keeps from F for its B (`saved`, by the layer's own slots) and from B for its W.
struct LayerContext {
  std::vector<Mat> saved;
  std::vector<int> tokens;
  std::vector<WeightGradTerm> pending;

  double bytes() const;
};

// Receives each weight-gradient term as B produces it.
using GradSink = std::function<void(WeightGradTerm&&)>;

// Which routed experts a replica's MoE blocks hold: replica group[i] of an ep group holds experts
// [i E/ep, (i+1) E/ep); with ep 1 every expert is here.
struct ExpertShard {
  int ep = 1;
  int index = 0;           // this replica's place in `group`
  std::vector<int> group;  // the replicas of the ep group, in order (empty with ep 1)
};

// One serving batch as a stage's layers see it (executor/cpu_serving.hpp): its chunks, each row's token and
// position (rows chunk by chunk), the stage's KV cache and each request's longest length (the rows to make).
struct ServeInput {
  const ServingStep* step = nullptr;
  std::vector<int> tokens;
  std::vector<long> positions;
  CpuKvCache* cache = nullptr;
  const std::vector<long>* capacity = nullptr;  // by request
};

class CpuLayer {
 public:
  virtual ~CpuLayer() = default;
  // `x` is the previous layer's output (ignored by the embedding). Returns this layer's output; the
  // head returns a 1 x 1 matrix holding the micro-batch's mean cross-entropy.
  virtual Mat forward(const Mat& x, const MicroBatch& batch, LayerContext& ctx) = 0;
  // `dy` is the gradient of the output (ignored by the head, which starts from its loss scaled by
  // `loss_scale`). Returns the gradient of the input (empty for the embedding). Frees what only B
  // needed and gives the weight-gradient work to `sink`.
  virtual Mat backward_input(const Mat& dy, LayerContext& ctx, double loss_scale, const GradSink& sink) = 0;
  // Forward for serving, keeping nothing for a backward: blocks write the batch's keys and values into the
  // cache (`layer` names this layer's rows there) and attend over each sequence's cached positions; the head
  // returns the logits of each sampling chunk's last row, in chunk order.
  virtual Mat serve(const Mat& x, const ServeInput& in, int layer) = 0;
  virtual std::vector<Param*> params() = 0;
  // The exchange with the other replicas (an MoE block whose experts are spread over them); it serves the
  // one rank that computes this layer.
  virtual void connect(Collectives*) {}
};

// Builds the layer for model.layers[index] with its initial weights: matrices from N(0, 0.02) drawn
// from `seed` and the parameter's name, norm scales 1, biases 0. With tied embeddings the head's LM weight
// is its own copy of the embedding's token table (transposed), kept equal by summing the two copies'
// gradients before each optimizer step (CpuModel::sum_tied_gradients).
// `recompute` applies to blocks: Full keeps only the block's input at F and reruns the block's forward at
// the start of B; Selective keeps all but the attention softmax, which B rebuilds from Q and K.
// An MoE block holds the routed experts `shard` names (all of them by default).
std::unique_ptr<CpuLayer> make_cpu_layer(const Model& model, int index, std::uint64_t seed,
                                         Recompute recompute = Recompute::None, const ExpertShard& shard = {});

// The model shapes the CPU backend runs: a transformer (not explicit per-layer costs). Throws BadInput
// naming the field and the fix otherwise.
void check_cpu_model(const Model& model);

}  // namespace pw
