#include "executor/cpu_backend.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "executor/host_memory.hpp"
#include "executor/host_tensor.hpp"
#include "executor/stage_layout.hpp"

namespace pw {

namespace {

// Each layer's recompute level: its stage's, or the one level for all.
std::vector<Recompute> layer_levels(const Model& model, const std::vector<LayerRange>& stages, const CpuBackendConfig& c) {
  std::vector<Recompute> levels(static_cast<size_t>(model.num_layers()), c.recompute);
  if (c.stage_recompute.empty()) return levels;
  if (c.stage_recompute.size() != stages.size())
    throw_bad_input("--stage-recompute: {} levels for {} stages; give one level per stage", c.stage_recompute.size(),
                    stages.size());
  for (size_t s = 0; s < stages.size(); ++s)
    for (int i = stages[s].first; i <= stages[s].last && i < model.num_layers(); ++i)
      if (i >= 0) levels[static_cast<size_t>(i)] = c.stage_recompute[s];
  return levels;
}

}  // namespace

CpuBackend::CpuBackend(const Model& model, std::vector<LayerRange> stage_layers, const CpuBackendConfig& config)
    : model_(model, config.seed, layer_levels(model, stage_layers, config)),
      stage_layers_(std::move(stage_layers)),
      config_(config) {
  keep_freed_host_memory();
  config_.seq_len = checked_seq_len(model, config_.micro_batch_size, config_.seq_len);
  check_stage_layers(model, stage_layers_);
}

void CpuBackend::sum_tied_gradients(const std::vector<int>& stages, const std::atomic<bool>* stop) {
  if (!model_.tied_table()) return;
  const int last = static_cast<int>(stage_layers_.size()) - 1;
  const auto holds = [&](int stage) { return std::find(stages.begin(), stages.end(), stage) != stages.end(); };
  const bool embedding = holds(0), head = holds(last);
  if (embedding && head) {
    model_.sum_tied_gradients();
    return;
  }
  if (!embedding && !head) return;
  const int other = embedding ? last : 0;
  {
    std::lock_guard lock(ranks_mutex_);
    if (local_stages_.count(other) == 0)
      throw_runtime("tied embeddings: stage {} holds the other copy of the shared matrix in another process; the cpu "
                    "backend sums the two copies' gradients through memory, so run ranks as threads",
                    other);
  }
  tied_.meet(stop, Clock::time_point::max(), "", [this] { model_.sum_tied_gradients(); });
}

std::vector<double> CpuBackend::losses() const { return losses_.values(); }

class CpuRank : public LossRank {
 public:
  CpuRank(CpuBackend& backend, const RankSetup& setup) : LossRank(backend.losses_), b_(backend), setup_(setup) {}

  TensorPtr forward(int stage, int mb, TensorPtr input) override {
    const LayerRange& range = b_.stage_layers_[static_cast<size_t>(stage)];
    StageContext& ctx = contexts_[{stage, mb}];
    const Mat& x = input ? static_cast<const HostTensor&>(*input).value : empty_;
    Mat out = b_.model_.forward(range, x, batch(mb), ctx);
    setup_.memory->add(ctx.bytes());
    if (range.last == b_.model_.num_layers() - 1) {
      add_loss(out(0, 0));
      return nullptr;
    }
    return std::make_shared<HostTensor>(std::move(out));
  }

  TensorPtr backward_input(int stage, int mb, TensorPtr grad_output) override {
    return backward_pass(stage, mb, std::move(grad_output), true);
  }

  void backward_weight(int stage, int mb) override {
    auto it = contexts_.find({stage, mb});
    const double before = it->second.bytes();
    b_.model_.backward_weight(it->second);
    contexts_.erase(it);
    setup_.memory->add(-before);
  }

  TensorPtr backward(int stage, int mb, TensorPtr grad_output) override {
    TensorPtr g = backward_pass(stage, mb, std::move(grad_output), false);
    contexts_.erase({stage, mb});
    return g;
  }

  void optimizer_step() override {
    b_.sum_tied_gradients(setup_.stages, setup_.stop);
    std::vector<Param*> params;
    for (int s : setup_.stages)
      for (Param* p : b_.model_.params(b_.stage_layers_[static_cast<size_t>(s)])) params.push_back(p);
    pw::optimizer_step(b_.config_.optimizer, params);
  }

 private:
  TensorPtr backward_pass(int stage, int mb, TensorPtr grad_output, bool defer) {
    StageContext& ctx = contexts_.at({stage, mb});
    const double before = ctx.bytes();
    const Mat& g = grad_output ? static_cast<const HostTensor&>(*grad_output).value : empty_;
    Mat dx = b_.model_.backward_input(b_.stage_layers_[static_cast<size_t>(stage)], g, ctx, 1.0 / microbatches(), defer);
    setup_.memory->add(ctx.bytes() - before);
    if (dx.size() == 0) return nullptr;
    return std::make_shared<HostTensor>(std::move(dx));
  }

  MicroBatch batch(int mb) const {
    const TransformerConfig& c = *b_.model_.model().transformer;
    return synthetic_microbatch(b_.config_.seed, iteration(), mb, b_.config_.micro_batch_size, b_.config_.seq_len,
                                c.vocab);
  }

  CpuBackend& b_;
  RankSetup setup_;
  std::map<std::pair<int, int>, StageContext> contexts_;
  const Mat empty_;
};

std::unique_ptr<RankCompute> CpuBackend::make_rank(const RankSetup& setup) {
  if (setup.num_stages != static_cast<int>(stage_layers_.size()))
    throw_bad_input("layer ranges: {} given for a schedule of {} stages; give one per stage", stage_layers_.size(),
                    setup.num_stages);
  {
    std::lock_guard lock(ranks_mutex_);
    local_stages_.insert(setup.stages.begin(), setup.stages.end());
  }
  return std::make_unique<CpuRank>(*this, setup);
}

}  // namespace pw
