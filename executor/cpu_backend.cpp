#include "executor/cpu_backend.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
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
    : spec_(model), stage_layers_(std::move(stage_layers)), config_(config) {
  check_cpu_model(model);
  config_.seq_len = checked_seq_len(model, config_.micro_batch_size, config_.seq_len);
  check_stage_layers(model, stage_layers_);
  layer_levels_ = layer_levels(model, stage_layers_, config_);
  if (config_.replicas < 1) throw_bad_input("--dp: must be at least 1, got {}", config_.replicas);
  const MoeConfig* moe = model.transformer->moe ? &*model.transformer->moe : nullptr;
  if (config_.ep < 1 || config_.replicas % config_.ep != 0)
    throw_bad_input("--ep: {} does not divide --dp {}; the cpu backend spreads the experts over data-parallel "
                    "replicas, so use a divisor of {}",
                    config_.ep, config_.replicas, config_.replicas);
  if (config_.ep > 1 && !moe)
    throw_bad_input("--ep: model '{}' has no routed experts to spread; use --ep 1", model.name);
  if (moe && moe->experts % config_.ep != 0)
    throw_bad_input("--ep: {} does not divide the {} experts of '{}'; use a divisor of {}", config_.ep, moe->experts,
                    model.name, moe->experts);
}

CpuBackend::Replica& CpuBackend::replica(int index) {
  std::lock_guard lock(ranks_mutex_);
  std::unique_ptr<Replica>& r = replicas_[index];
  if (!r) {
    ExpertShard shard;
    shard.ep = config_.ep;
    shard.index = index % config_.ep;
    for (int i = 0; i < config_.ep; ++i) shard.group.push_back(index - shard.index + i);
    r = std::make_unique<Replica>();
    r->model = std::make_unique<CpuModel>(spec_, config_.seed, layer_levels_, shard);
  }
  return *r;
}

CpuModel& CpuBackend::model(int replica_index) { return *replica(replica_index).model; }

void CpuBackend::sum_tied_gradients(int replica_index, const std::vector<int>& stages, const std::atomic<bool>* stop) {
  Replica& rep = replica(replica_index);
  CpuModel& model = *rep.model;
  if (!model.tied_table()) return;
  const int last = static_cast<int>(stage_layers_.size()) - 1;
  const auto holds = [&](int stage) { return std::find(stages.begin(), stages.end(), stage) != stages.end(); };
  const bool embedding = holds(0), head = holds(last);
  if (embedding && head) {
    model.sum_tied_gradients();
    return;
  }
  if (!embedding && !head) return;
  const int other = embedding ? last : 0;
  {
    std::lock_guard lock(ranks_mutex_);
    if (local_stages_.count({replica_index, other}) == 0)
      throw_runtime("tied embeddings: stage {} holds the other copy of the shared matrix in another process; the cpu "
                    "backend sums the two copies' gradients through memory, so run ranks as threads",
                    other);
  }
  rep.tied.meet(stop, Clock::time_point::max(), "", [&model] { model.sum_tied_gradients(); });
}

namespace {

// The mean of each parameter's gradient over the replicas `group` (of `replicas` in all: the divisor, as
// every replica's loss counts once in the mean). Every member adds the same parts in group order.
void average_over(Collectives& collectives, const std::vector<int>& group, int replicas, const std::vector<Param*>& params) {
  if (params.empty()) return;
  Eigen::Index n = 0;
  for (const Param* p : params) n += p->grad.size();
  const float scale = 1.0f / static_cast<float>(replicas);
  if (group.size() == 1) {
    for (Param* p : params) p->grad *= scale;
    return;
  }
  Mat flat(n, 1);
  Eigen::Index at = 0;
  for (const Param* p : params) {
    flat.middleRows(at, p->grad.size()) = Eigen::Map<const Mat>(p->grad.data(), p->grad.size(), 1);
    at += p->grad.size();
  }
  const TensorPtr mine = std::make_shared<HostTensor>(std::move(flat));
  const std::vector<TensorPtr> got = collectives.all_to_all(group, std::vector<TensorPtr>(group.size(), mine));
  Mat sum = Mat::Zero(n, 1);
  for (const TensorPtr& t : got) sum += static_cast<const HostTensor&>(*t).value;
  sum *= scale;
  at = 0;
  for (Param* p : params) {
    Eigen::Map<Mat>(p->grad.data(), p->grad.size(), 1) = sum.middleRows(at, p->grad.size());
    at += p->grad.size();
  }
}

}  // namespace

std::vector<double> CpuBackend::losses() const { return losses_.values(); }

class CpuRank : public LossRank {
 public:
  CpuRank(CpuBackend& backend, const RankSetup& setup)
      : LossRank(backend.losses_), b_(backend), setup_(setup), model_(backend.model(setup.replica)) {
    if (setup.collectives)
      for (int s : setup.stages) model_.connect(b_.stage_layers_[static_cast<size_t>(s)], setup.collectives);
  }

  TensorPtr forward(int stage, int mb, TensorPtr input) override {
    const LayerRange& range = b_.stage_layers_[static_cast<size_t>(stage)];
    StageContext& ctx = contexts_[{stage, mb}];
    const Mat& x = input ? static_cast<const HostTensor&>(*input).value : empty_;
    Mat out = model_.forward(range, x, batch(mb), ctx);
    setup_.memory->add(ctx.bytes());
    if (range.last == model_.num_layers() - 1) {
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
    model_.backward_weight(it->second);
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
      for (Param* p : model_.params(b_.stage_layers_[static_cast<size_t>(s)])) params.push_back(p);
    if (setup_.replicas > 1) average_gradients(params);
    b_.sum_tied_gradients(setup_.replica, setup_.stages, setup_.stop);
    pw::optimizer_step(b_.config_.optimizer, params);
  }

 private:
  // Over all replicas, and the routed experts' over the replicas holding the same experts.
  void average_gradients(const std::vector<Param*>& params) {
    std::vector<Param*> dense, experts;
    for (Param* p : params) (p->expert ? experts : dense).push_back(p);
    std::vector<int> all(static_cast<size_t>(setup_.replicas)), same_experts;
    for (int d = 0; d < setup_.replicas; ++d) {
      all[static_cast<size_t>(d)] = d;
      if (d % b_.config_.ep == setup_.replica % b_.config_.ep) same_experts.push_back(d);
    }
    average_over(*setup_.collectives, all, setup_.replicas, dense);
    average_over(*setup_.collectives, same_experts, setup_.replicas, experts);
  }

  TensorPtr backward_pass(int stage, int mb, TensorPtr grad_output, bool defer) {
    StageContext& ctx = contexts_.at({stage, mb});
    const double before = ctx.bytes();
    const Mat& g = grad_output ? static_cast<const HostTensor&>(*grad_output).value : empty_;
    Mat dx = model_.backward_input(b_.stage_layers_[static_cast<size_t>(stage)], g, ctx, 1.0 / microbatches(), defer);
    setup_.memory->add(ctx.bytes() - before);
    if (dx.size() == 0) return nullptr;
    return std::make_shared<HostTensor>(std::move(dx));
  }

  // Replica d's micro-batch mb is micro-batch d m + mb of the data.
  MicroBatch batch(int mb) const {
    const TransformerConfig& c = *model_.model().transformer;
    return synthetic_microbatch(b_.config_.seed, iteration(), setup_.replica * microbatches() + mb,
                                b_.config_.micro_batch_size, b_.config_.seq_len, c.vocab);
  }

  CpuBackend& b_;
  RankSetup setup_;
  CpuModel& model_;
  std::map<std::pair<int, int>, StageContext> contexts_;
  const Mat empty_;
};

std::unique_ptr<RankCompute> CpuBackend::make_rank(const RankSetup& setup) {
  if (setup.num_stages != static_cast<int>(stage_layers_.size()))
    throw_bad_input("layer ranges: {} given for a schedule of {} stages; give one per stage", stage_layers_.size(),
                    setup.num_stages);
  if (setup.replicas != config_.replicas)
    throw_runtime("cpu backend: built for {} replicas, run with {}", config_.replicas, setup.replicas);
  {
    std::lock_guard lock(ranks_mutex_);
    for (int s : setup.stages) local_stages_.insert({setup.replica, s});
  }
  return std::make_unique<CpuRank>(*this, setup);
}

}  // namespace pw
