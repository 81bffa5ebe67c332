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
//
// Data parallelism (RunOptions::replicas): each replica holds its own copy of the model and trains on its
// own micro-batches (replica d's micro-batch i is the data's d m + i); before the optimizer step the
// replicas of a pipeline rank average their gradients through the runtime's Collectives (every member
// sums the same parts in the same order, so the copies stay bit-identical). With ep > 1 the routed experts
// are spread over groups of ep consecutive replicas (Megatron-Core's folding of ep into dp): an expert's
// gradient is averaged over the replicas holding it (the expert-data-parallel group), the rest over all.
#include <cstdint>
#include <map>
#include <memory>
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
  int replicas = 1;  // data-parallel copies of the pipeline (the runtime's RunOptions::replicas)
  int ep = 1;        // replicas each MoE block's routed experts are spread over
};

class CpuBackend : public Backend {
 public:
  // `stage_layers[s]` is stage s's layer range. BadInput for models the CPU cannot run, a sequence longer
  // than learned positions allow, ranges that do not cover the model, or an ep that does not divide the
  // replicas and the experts.
  CpuBackend(const Model& model, std::vector<LayerRange> stage_layers, const CpuBackendConfig& config);

  std::string name() const override { return "cpu"; }
  std::unique_ptr<RankCompute> make_rank(const RankSetup& setup) override;

  // Replica `replica`'s copy of the model, built on first use.
  CpuModel& model(int replica = 0);
  // The mean loss over the micro-batches of each iteration run so far.
  std::vector<double> losses() const;

 private:
  friend class CpuRank;
  struct Replica {
    std::unique_ptr<CpuModel> model;
    PairMeeting tied;  // the ranks holding the tied copies, at each optimizer step
  };
  Replica& replica(int index);
  // Sums the tied gradients for the rank of `replica` holding `stages`; Runtime error when the other copy's
  // stage runs in no rank of this process (one process per rank).
  void sum_tied_gradients(int replica, const std::vector<int>& stages, const std::atomic<bool>* stop);

  Model spec_;
  std::vector<LayerRange> stage_layers_;
  std::vector<Recompute> layer_levels_;
  CpuBackendConfig config_;
  LossLog losses_;
  std::mutex ranks_mutex_;
  std::map<int, std::unique_ptr<Replica>> replicas_;
  std::set<std::pair<int, int>> local_stages_;  // (replica, stage) of the ranks made here
};

}  // namespace pw
