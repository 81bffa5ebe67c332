#pragma once
// The CPU backend: real float32 layers (executor/cpu_model.hpp), one thread per rank, trained on the
// synthetic micro-batches. Activation memory is what F keeps for B and B for W, counted as it changes
// (tensors that live only inside one action, such as the activations B recomputes, are not counted).
//
// Tied embeddings: the embedding (stage 0) and the head (the last stage) each hold a copy of the shared
// matrix and accumulate their own gradient. At the optimizer step a rank holding both sums them itself;
// when two ranks hold them, both meet (PairMeeting, through the process's memory), the second to
// arrive writes the sum into both copies, and each rank steps its copy: the same gradients and the same
// optimizer state keep the copies equal.
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "core/stage_costs.hpp"
#include "executor/backend.hpp"
#include "executor/cpu_model.hpp"
#include "executor/pair_meeting.hpp"

namespace pw {

struct CpuBackendConfig {
  int micro_batch_size = 1;
  int seq_len = 0;  // 0: the model's
  std::uint64_t seed = 1;
  OptimizerConfig optimizer;
  Recompute recompute = Recompute::None;  // of the blocks: none, selective or full (make_cpu_layer)
  std::vector<Recompute> stage_recompute;  // one level per stage instead (per-stage recompute); empty: `recompute`
};

class CpuBackend : public Backend {
 public:
  // `stage_layers[s]` is stage s's layer range. BadInput for models the CPU cannot run, a sequence longer
  // than learned positions allow, or ranges that do not cover the model.
  CpuBackend(const Model& model, std::vector<LayerRange> stage_layers, const CpuBackendConfig& config);

  std::string name() const override { return "cpu"; }
  std::unique_ptr<RankCompute> make_rank(const RankSetup& setup) override;

  CpuModel& model() { return model_; }
  // The mean loss over the micro-batches of each iteration run so far.
  std::vector<double> losses() const;

 private:
  friend class CpuRank;
  // Sums the tied gradients for the rank holding `stages`; Runtime error when the other copy's stage runs in
  // no rank of this process (one process per rank).
  void sum_tied_gradients(const std::vector<int>& stages, const std::atomic<bool>* stop);

  CpuModel model_;
  std::vector<LayerRange> stage_layers_;
  CpuBackendConfig config_;
  LossLog losses_;
  std::mutex ranks_mutex_;
  std::set<int> local_stages_;  // the stages of the ranks made here
  PairMeeting tied_;  // the ranks holding the tied copies, at each optimizer step
};

}  // namespace pw
