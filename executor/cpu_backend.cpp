#include "executor/cpu_backend.hpp"

#include <map>

#include "core/error.hpp"
#include "executor/host_tensor.hpp"

namespace pw {

CpuBackend::CpuBackend(const Model& model, std::vector<LayerRange> stage_layers, const CpuBackendConfig& config)
    : model_(model, config.seed), stage_layers_(std::move(stage_layers)), config_(config) {
  const TransformerConfig& c = *model.transformer;
  if (config_.seq_len == 0) config_.seq_len = c.max_seq_len;
  if (config_.micro_batch_size < 1)
    throw_bad_input("--micro-batch-size: must be at least 1, got {}", config_.micro_batch_size);
  if (config_.seq_len < 1) throw_bad_input("--seq-len: must be at least 1, got {}", config_.seq_len);
  if (c.learned_positions && config_.seq_len > c.max_seq_len)
    throw_bad_input("--seq-len: {} exceeds the {} learned positions of '{}'; use --seq-len {} or less", config_.seq_len,
                    c.max_seq_len, model.name, c.max_seq_len);
  int next = 0;
  for (const LayerRange& r : stage_layers_) {
    if (r.first != next || r.last < r.first) throw_bad_input("layer ranges: they must be contiguous and non-empty");
    next = r.last + 1;
  }
  if (next != model.num_layers())
    throw_bad_input("layer ranges: they cover {} of the {} layers of '{}'", next, model.num_layers(), model.name);
}

std::vector<double> CpuBackend::losses() const {
  std::lock_guard lock(losses_mutex_);
  return losses_;
}

class CpuRank : public RankCompute {
 public:
  CpuRank(CpuBackend& backend, const RankSetup& setup) : b_(backend), setup_(setup) {}

  void begin_iteration(int iteration, int microbatches) override {
    iteration_ = iteration;
    m_ = microbatches;
    loss_ = 0;
    holds_head_ = false;
  }

  void end_iteration() override {
    if (!holds_head_) return;
    std::lock_guard lock(b_.losses_mutex_);
    b_.losses_.push_back(loss_);
  }

  TensorPtr forward(int stage, int mb, TensorPtr input) override {
    const LayerRange& range = b_.stage_layers_[static_cast<size_t>(stage)];
    StageContext& ctx = contexts_[{stage, mb}];
    const Mat& x = input ? static_cast<const HostTensor&>(*input).value : empty_;
    Mat out = b_.model_.forward(range, x, batch(mb), ctx);
    setup_.memory->add(ctx.bytes());
    if (range.last == b_.model_.num_layers() - 1) {
      holds_head_ = true;
      loss_ += out(0, 0) / static_cast<double>(m_);
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
    Mat dx = b_.model_.backward_input(b_.stage_layers_[static_cast<size_t>(stage)], g, ctx, 1.0 / m_, defer);
    setup_.memory->add(ctx.bytes() - before);
    if (dx.size() == 0) return nullptr;
    return std::make_shared<HostTensor>(std::move(dx));
  }

  MicroBatch batch(int mb) const {
    const TransformerConfig& c = *b_.model_.model().transformer;
    return synthetic_microbatch(b_.config_.seed, iteration_, mb, b_.config_.micro_batch_size, b_.config_.seq_len,
                                c.vocab);
  }

  CpuBackend& b_;
  RankSetup setup_;
  std::map<std::pair<int, int>, StageContext> contexts_;
  const Mat empty_;
  int iteration_ = 0;
  int m_ = 1;
  double loss_ = 0;
  bool holds_head_ = false;
};

std::unique_ptr<RankCompute> CpuBackend::make_rank(const RankSetup& setup) {
  if (setup.num_stages != static_cast<int>(stage_layers_.size()))
    throw_bad_input("layer ranges: {} given for a schedule of {} stages; give one per stage", stage_layers_.size(),
                    setup.num_stages);
  return std::make_unique<CpuRank>(*this, setup);
}

}  // namespace pw
