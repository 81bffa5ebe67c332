#pragma once
// A whole transformer's layers on the CPU and the stage-level F, B, W over a range of them; the
// optimizers; the synthetic token batches every run (and its single-rank reference) trains on.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model.hpp"
#include "core/stage_costs.hpp"
#include "executor/cpu_layers.hpp"

namespace pw {

// Everything one stage keeps for one micro-batch between its F, B and W: one context per layer.
struct StageContext {
  std::vector<LayerContext> layers;
  double bytes() const;
};

class CpuModel {
 public:
  // Every layer of `model` with weights drawn from `seed` (BadInput for models the CPU cannot run); blocks
  // recompute as `recompute` says (make_cpu_layer).
  CpuModel(const Model& model, std::uint64_t seed, Recompute recompute = Recompute::None);
  // Layer i recomputes as layer_recompute[i] says (one level per layer of the model); MoE blocks hold the
  // routed experts `shard` names.
  CpuModel(const Model& model, std::uint64_t seed, const std::vector<Recompute>& layer_recompute,
           const ExpertShard& shard = {});

  const Model& model() const { return model_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }

  // Tied embeddings: the embedding's token table (vocab x hidden) and the head's copy of it (hidden x
  // vocab); null when the embeddings are not tied.
  Param* tied_table() const { return tied_table_; }
  Param* tied_head() const { return tied_head_; }
  // The gradient of the shared matrix is the sum of both uses: adds the two copies' gradients and writes
  // the sum into both (transposed for the head), so that the same optimizer step keeps them equal. Call it
  // once per iteration, after every W and before the step. Nothing to do without tied embeddings.
  void sum_tied_gradients();

  // F of layers [range.first, range.last]. `input` is the previous stage's output (ignored when the range
  // starts at the embedding). Returns the output; a range ending at the head returns the 1 x 1 mean loss.
  Mat forward(const LayerRange& range, const Mat& input, const MicroBatch& mb, StageContext& ctx);
  // Serving's forward of layers [range.first, range.last] over one batch (CpuLayer::serve): the hidden
  // states out, or the sampled rows' logits from a range ending at the head.
  Mat serve(const LayerRange& range, const Mat& input, const ServeInput& in);
  // B of the range: `grad_output` is the gradient of its output (ignored when it ends at the head, whose
  // loss is scaled by `loss_scale`). Returns the gradient of its input (empty when it starts at the
  // embedding). `defer_weights`: keep the weight-gradient work in `ctx` for backward_weight; otherwise
  // apply it now (the fused BW).
  Mat backward_input(const LayerRange& range, const Mat& grad_output, StageContext& ctx, double loss_scale,
                     bool defer_weights);
  // W: applies what B kept and empties `ctx`.
  void backward_weight(StageContext& ctx);

  // The layers of `range` exchange with the other replicas through `collectives` (MoE blocks whose experts
  // are spread over them).
  void connect(const LayerRange& range, Collectives* collectives);

  std::vector<Param*> params(const LayerRange& range);
  std::vector<Param*> params();

 private:
  Model model_;
  std::vector<std::unique_ptr<CpuLayer>> layers_;
  Param* tied_table_ = nullptr;
  Param* tied_head_ = nullptr;
};

// Micro-batch `microbatch` of iteration `iteration`: each sequence starts at a random token and follows
// t -> (5 t + 3) mod vocab, so that a model can learn it and the loss falls. Deterministic in all inputs.
MicroBatch synthetic_microbatch(std::uint64_t seed, int iteration, int microbatch, int batch, int seq, long vocab);

enum class OptimizerKind { Sgd, Adam };
// "sgd" or "adam"; BadInput naming --optimizer otherwise.
OptimizerKind optimizer_from_string(const std::string& text);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Adam;
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// One step over `params` from their accumulated gradients (SGD: w -= lr g; Adam with bias correction),
// then zeroes the gradients.
void optimizer_step(const OptimizerConfig& config, const std::vector<Param*>& params);

}  // namespace pw
