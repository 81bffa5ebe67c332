#include "executor/cpu_model.hpp"

#include <cmath>

#include "core/error.hpp"
#include "executor/host_memory.hpp"

namespace pw {

double StageContext::bytes() const {
  double total = 0;
  for (const LayerContext& l : layers) total += l.bytes();
  return total;
}

CpuModel::CpuModel(const Model& model, std::uint64_t seed, Recompute recompute)
    : CpuModel(model, seed, std::vector<Recompute>(static_cast<size_t>(model.num_layers()), recompute)) {}

CpuModel::CpuModel(const Model& model, std::uint64_t seed, const std::vector<Recompute>& layer_recompute,
                   const ExpertShard& shard)
    : model_(model) {
  check_cpu_model(model);
  // Every runner of CPU layers (training ranks, serving stages, the profilers) allocates and frees tensors per
  // action; with glibc's defaults each would pay page faults that the next one's timing does not.
  keep_freed_host_memory();
  if (static_cast<int>(layer_recompute.size()) != model.num_layers())
    throw_runtime("CpuModel: {} recompute levels for the {} layers of '{}'", layer_recompute.size(), model.num_layers(),
                  model.name);
  for (int i = 0; i < model.num_layers(); ++i)
    layers_.push_back(make_cpu_layer(model, i, seed, layer_recompute[static_cast<size_t>(i)], shard));
  if (model.transformer->tied_embeddings) {
    // The embedding's first parameter is its token table; the head's last is the LM weight (no bias).
    tied_table_ = layers_.front()->params().front();
    tied_head_ = layers_.back()->params().back();
  }
}

void CpuModel::sum_tied_gradients() {
  if (!tied_table_) return;
  const Mat sum = tied_table_->grad + tied_head_->grad.transpose();
  tied_table_->grad = sum;
  tied_head_->grad = sum.transpose();
}

Mat CpuModel::forward(const LayerRange& range, const Mat& input, const MicroBatch& mb, StageContext& ctx) {
  ctx.layers.assign(static_cast<size_t>(range.count()), LayerContext{});
  Mat x = input;
  for (int i = range.first; i <= range.last; ++i)
    x = layers_[static_cast<size_t>(i)]->forward(x, mb, ctx.layers[static_cast<size_t>(i - range.first)]);
  return x;
}

Mat CpuModel::serve(const LayerRange& range, const Mat& input, const ServeInput& in) {
  Mat x = input;
  for (int i = range.first; i <= range.last; ++i) x = layers_[static_cast<size_t>(i)]->serve(x, in, i);
  return x;
}

Mat CpuModel::backward_input(const LayerRange& range, const Mat& grad_output, StageContext& ctx, double loss_scale,
                             bool defer_weights) {
  Mat g = grad_output;
  for (int i = range.last; i >= range.first; --i) {
    LayerContext& lc = ctx.layers[static_cast<size_t>(i - range.first)];
    const GradSink sink = [&](WeightGradTerm&& t) {
      if (defer_weights) {
        lc.pending.push_back(std::move(t));
      } else {
        apply(t);
      }
    };
    g = layers_[static_cast<size_t>(i)]->backward_input(g, lc, loss_scale, sink);
  }
  return g;
}

void CpuModel::backward_weight(StageContext& ctx) {
  for (LayerContext& lc : ctx.layers) {
    for (const WeightGradTerm& t : lc.pending) apply(t);
    lc.pending.clear();
  }
  ctx.layers.clear();
}

void CpuModel::connect(const LayerRange& range, Collectives* collectives) {
  for (int i = range.first; i <= range.last; ++i) layers_[static_cast<size_t>(i)]->connect(collectives);
}

std::vector<Param*> CpuModel::params(const LayerRange& range) {
  std::vector<Param*> out;
  for (int i = range.first; i <= range.last; ++i)
    for (Param* p : layers_[static_cast<size_t>(i)]->params()) out.push_back(p);
  return out;
}

std::vector<Param*> CpuModel::params() { return params(LayerRange{0, num_layers() - 1}); }

MicroBatch synthetic_microbatch(std::uint64_t seed, int iteration, int microbatch, int batch, int seq, long vocab) {
  MicroBatch mb;
  mb.batch = batch;
  mb.seq = seq;
  mb.tokens.resize(static_cast<size_t>(batch) * static_cast<size_t>(seq));
  mb.targets.resize(mb.tokens.size());
  for (int b = 0; b < batch; ++b) {
    Rng rng(seed_for(seed, fmt::format("data.{}.{}.{}", iteration, microbatch, b)));
    long t = static_cast<long>(rng.next() % static_cast<std::uint64_t>(vocab));
    for (int i = 0; i < seq; ++i) {
      const size_t r = static_cast<size_t>(b) * static_cast<size_t>(seq) + static_cast<size_t>(i);
      mb.tokens[r] = static_cast<int>(t);
      t = (5 * t + 3) % vocab;
      mb.targets[r] = static_cast<int>(t);
    }
  }
  return mb;
}

OptimizerKind optimizer_from_string(const std::string& text) {
  if (text == "sgd") return OptimizerKind::Sgd;
  if (text == "adam") return OptimizerKind::Adam;
  throw_bad_input("--optimizer: unknown optimizer '{}'; use sgd or adam", text);
}

void optimizer_step(const OptimizerConfig& c, const std::vector<Param*>& params) {
  const float lr = static_cast<float>(c.lr);
  for (Param* p : params) {
    ++p->steps;
    if (c.kind == OptimizerKind::Sgd) {
      p->value -= lr * p->grad;
    } else {
      if (p->adam_m.size() != p->value.size()) {
        p->adam_m.setZero(p->value.rows(), p->value.cols());
        p->adam_v.setZero(p->value.rows(), p->value.cols());
      }
      const float b1 = static_cast<float>(c.beta1), b2 = static_cast<float>(c.beta2);
      p->adam_m = b1 * p->adam_m + (1 - b1) * p->grad;
      p->adam_v = b2 * p->adam_v + (1 - b2) * p->grad.cwiseProduct(p->grad);
      const float c1 = static_cast<float>(1 - std::pow(c.beta1, p->steps));
      const float c2 = static_cast<float>(1 - std::pow(c.beta2, p->steps));
      const float eps = static_cast<float>(c.eps);
      p->value.array() -= lr * (p->adam_m.array() / c1) / ((p->adam_v.array() / c2).sqrt() + eps);
    }
    p->grad.setZero();
  }
}

}  // namespace pw
