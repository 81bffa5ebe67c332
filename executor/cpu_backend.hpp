#pragma once
// The CPU backend: real float32 layers (executor/cpu_model.hpp), one thread per rank, trained on the
// synthetic micro-batches. Activation memory is what F keeps for B and B for W, counted as it changes.
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/stage_costs.hpp"
#include "executor/backend.hpp"
#include "executor/cpu_model.hpp"

namespace pw {

struct CpuBackendConfig {
  int micro_batch_size = 1;
  int seq_len = 0;  // 0: the model's
  std::uint64_t seed = 1;
  OptimizerConfig optimizer;
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
  CpuModel model_;
  std::vector<LayerRange> stage_layers_;
  CpuBackendConfig config_;
  mutable std::mutex losses_mutex_;
  std::vector<double> losses_;
};

}  // namespace pw
