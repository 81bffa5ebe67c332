#include "executor/cpu_layers.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "executor/cpu_layer_parts.hpp"
#include "executor/cpu_moe_mlp.hpp"

namespace pw {

void apply(const WeightGradTerm& t) {
  switch (t.kind) {
    case WeightGradTerm::Kind::Linear:
      ops::linear_backward_weight(t.input, t.grad, t.weight->grad, t.bias ? &t.bias->grad : nullptr);
      break;
    case WeightGradTerm::Kind::Norm:
      ops::norm_backward_weight(t.grad, t.input, t.weight->grad, t.bias ? &t.bias->grad : nullptr);
      break;
    case WeightGradTerm::Kind::Embedding:
      for (Eigen::Index r = 0; r < t.grad.rows(); ++r) {
        t.weight->grad.row(t.tokens[static_cast<size_t>(r)]) += t.grad.row(r);
        if (t.bias) t.bias->grad.row(r % t.seq) += t.grad.row(r);
      }
      break;
  }
}

double LayerContext::bytes() const {
  double total = 4.0 * static_cast<double>(tokens.size());
  for (const Mat& m : saved) total += bytes_of(m);
  for (const WeightGradTerm& t : pending) total += t.bytes();
  return total;
}

namespace {

using cpu::Linear;
using cpu::make_param;
using cpu::Norm;

class Embedding : public CpuLayer {
 public:
  Embedding(const std::string& name, const TransformerConfig& c, std::uint64_t seed)
      : positions_(c.learned_positions) {
    tokens_ = make_param(name + ".tokens", c.vocab, c.hidden, 0.0, seed, true);
    if (positions_) positions_table_ = make_param(name + ".positions", c.max_seq_len, c.hidden, 0.0, seed, true);
  }

  Mat forward(const Mat&, const MicroBatch& mb, LayerContext& ctx) override {
    Mat x(static_cast<Eigen::Index>(mb.tokens.size()), tokens_.value.cols());
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
      x.row(r) = tokens_.value.row(mb.tokens[static_cast<size_t>(r)]);
      if (positions_) x.row(r) += positions_table_.value.row(r % mb.seq);
    }
    ctx.tokens = mb.tokens;
    seq_ = mb.seq;
    return x;
  }

  Mat serve(const Mat&, const ServeInput& in, int) override {
    Mat x(static_cast<Eigen::Index>(in.tokens.size()), tokens_.value.cols());
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
      x.row(r) = tokens_.value.row(in.tokens[static_cast<size_t>(r)]);
      if (positions_) x.row(r) += positions_table_.value.row(in.positions[static_cast<size_t>(r)]);
    }
    return x;
  }

  Mat backward_input(const Mat& dy, LayerContext& ctx, double, const GradSink& sink) override {
    sink(WeightGradTerm{WeightGradTerm::Kind::Embedding, Mat(), dy, std::move(ctx.tokens), seq_, &tokens_,
                        positions_ ? &positions_table_ : nullptr});
    ctx.tokens.clear();
    return Mat();
  }

  std::vector<Param*> params() override {
    std::vector<Param*> out{&tokens_};
    if (positions_) out.push_back(&positions_table_);
    return out;
  }

 private:
  bool positions_ = false;
  int seq_ = 1;
  Param tokens_, positions_table_;
};

class Block : public CpuLayer {
 public:
  Block(const std::string& name, const TransformerConfig& c, std::uint64_t seed, Recompute recompute,
        std::unique_ptr<cpu::CpuMlp> mlp)
      : c_(c),
        recompute_(recompute),
        q_(c.heads * c.head_dim),
        kv_(c.kv_heads * c.head_dim),
        norm1_(name + ".norm1", c.norm, c.hidden, seed),
        norm2_(name + ".norm2", c.norm, c.hidden, seed),
        qkv_(name + ".qkv", c.hidden, q_ + 2 * kv_, c.bias || c.qkv_bias, seed),
        out_(name + ".out", q_, c.hidden, c.bias, seed),
        mlp_(std::move(mlp)) {}

  // Saved slots from F for B; the MLP's own follow from kMlp.
  enum Slot { kXhat1, kRstd1, kN1, kQ, kK, kV, kProbs, kO, kXhat2, kRstd2, kN2, kMlp };

  Mat forward(const Mat& x, const MicroBatch& mb, LayerContext& ctx) override {
    shape_ = {mb.batch, mb.seq, c_.heads, c_.kv_heads, c_.head_dim};
    if (recompute_ == Recompute::Full) {
      // Only the block's input stays; B rebuilds everything else from it.
      std::vector<Mat> scratch;
      Mat y = run_forward(x, scratch);
      ctx.saved.assign(1, x);
      return y;
    }
    Mat y = run_forward(x, ctx.saved);
    // The softmax, the s x s part, is rebuilt in B from Q and K.
    if (recompute_ == Recompute::Selective) ctx.saved[kProbs] = Mat();
    return y;
  }

  Mat backward_input(const Mat& dy, LayerContext& ctx, double, const GradSink& sink) override {
    std::vector<Mat>& s = ctx.saved;
    if (recompute_ == Recompute::Full) {
      const Mat x = std::move(s.front());
      run_forward(x, s);
    } else if (recompute_ == Recompute::Selective) {
      s[kProbs] = ops::attention_probs(s[kQ], s[kK], shape_);
    }
    return run_backward(dy, s, sink);
  }

  Mat serve(const Mat& x, const ServeInput& in, int layer) override {
    Mat xhat, rstd;
    const Mat qkv = qkv_.forward(norm1_.forward(x, xhat, rstd));
    Mat q = qkv.leftCols(q_), k = qkv.middleCols(q_, kv_);
    if (!c_.learned_positions) {
      ops::rotary_at(q, c_.heads, c_.head_dim, in.positions);
      ops::rotary_at(k, c_.kv_heads, c_.head_dim, in.positions);
    }
    const ops::AttentionShape shape{1, 1, c_.heads, c_.kv_heads, c_.head_dim};
    Mat o(x.rows(), q_);
    Eigen::Index row = 0;
    for (const SequenceChunk& chunk : *in.step) {
      const Eigen::Index n = chunk.tokens;
      KvRows& kv = in.cache->at(layer, chunk.request, (*in.capacity)[static_cast<size_t>(chunk.request)], kv_);
      kv.k.middleRows(chunk.start, n) = k.middleRows(row, n);
      kv.v.middleRows(chunk.start, n) = qkv.block(row, q_ + kv_, n, kv_);
      o.middleRows(row, n) = ops::cached_attention(q.middleRows(row, n), kv.k, kv.v, chunk.start, shape);
      row += n;
    }
    const Mat x1 = x + out_.forward(o);
    std::vector<Mat> scratch(static_cast<size_t>(mlp_->slots()));
    return x1 + mlp_->forward(norm2_.forward(x1, xhat, rstd), scratch.data());
  }

  std::vector<Param*> params() override {
    std::vector<Param*> out;
    norm1_.collect(out);
    qkv_.collect(out);
    out_.collect(out);
    norm2_.collect(out);
    mlp_->collect(out);
    return out;
  }

  void connect(Collectives* collectives) override { mlp_->connect(collectives); }

 private:
  // F keeping every slot B needs in `s`. Recomputation runs it again, bit for bit, from the same input (an
  // MoE MLP exchanging tokens again with the other replicas, which recompute alike).
  Mat run_forward(const Mat& x, std::vector<Mat>& s) {
    s.assign(static_cast<size_t>(kMlp + mlp_->slots()), Mat());
    s[kN1] = norm1_.forward(x, s[kXhat1], s[kRstd1]);
    const Mat qkv = qkv_.forward(s[kN1]);
    s[kQ] = qkv.leftCols(q_);
    s[kK] = qkv.middleCols(q_, kv_);
    s[kV] = qkv.rightCols(kv_);
    if (!c_.learned_positions) {
      ops::rotary(s[kQ], c_.heads, c_.head_dim, shape_.seq, false);
      ops::rotary(s[kK], c_.kv_heads, c_.head_dim, shape_.seq, false);
    }
    s[kO] = ops::attention_forward(s[kQ], s[kK], s[kV], shape_, s[kProbs]);
    const Mat x1 = x + out_.forward(s[kO]);
    s[kN2] = norm2_.forward(x1, s[kXhat2], s[kRstd2]);
    return x1 + mlp_->forward(s[kN2], s.data() + kMlp);
  }

  Mat run_backward(const Mat& dy, std::vector<Mat>& s, const GradSink& sink) {
    // MLP: y = x1 + mlp(norm2(x1)).
    const Mat dn2 = mlp_->backward(dy, s[kN2], s.data() + kMlp, sink);
    Mat dx1 = dy + norm2_.backward_input(dn2, s[kXhat2], s[kRstd2]);
    sink(norm2_.term(std::move(s[kXhat2]), dn2));
    // Attention: x1 = x + out(attention(rotary(qkv(norm1(x))))).
    const Mat dO = out_.backward_input(dx1);
    sink(out_.term(std::move(s[kO]), dx1));
    Mat dq, dk, dv;
    ops::attention_backward(dO, s[kQ], s[kK], s[kV], s[kProbs], shape_, dq, dk, dv);
    if (!c_.learned_positions) {
      ops::rotary(dq, c_.heads, c_.head_dim, shape_.seq, true);
      ops::rotary(dk, c_.kv_heads, c_.head_dim, shape_.seq, true);
    }
    Mat dqkv(dq.rows(), q_ + 2 * kv_);
    dqkv << dq, dk, dv;
    const Mat dn1 = qkv_.backward_input(dqkv);
    sink(qkv_.term(std::move(s[kN1]), std::move(dqkv)));
    Mat dx = std::move(dx1);
    dx += norm1_.backward_input(dn1, s[kXhat1], s[kRstd1]);
    sink(norm1_.term(std::move(s[kXhat1]), dn1));
    s.clear();
    return dx;
  }

  TransformerConfig c_;
  Recompute recompute_;
  int q_, kv_;
  Norm norm1_, norm2_;
  Linear qkv_, out_;
  std::unique_ptr<cpu::CpuMlp> mlp_;
  ops::AttentionShape shape_;
};

class Head : public CpuLayer {
 public:
  // `tied_table`: the embedding's token table parameter name when the embeddings are tied; the LM head then
  // starts as its own copy of that table, transposed.
  Head(const std::string& name, const TransformerConfig& c, std::uint64_t seed, const std::string& tied_table)
      : norm_(name + ".norm", c.norm, c.hidden, seed), lm_(name + ".lm", c.hidden, static_cast<int>(c.vocab), false, seed) {
    if (!tied_table.empty()) lm_.w.value = make_param(tied_table, c.vocab, c.hidden, 0.0, seed, true).value.transpose();
  }

  enum Slot { kXhat, kRstd, kN, kProbs, kSlots };

  Mat forward(const Mat& x, const MicroBatch& mb, LayerContext& ctx) override {
    std::vector<Mat>& s = ctx.saved;
    s.assign(kSlots, Mat());
    s[kN] = norm_.forward(x, s[kXhat], s[kRstd]);
    const double loss = ops::cross_entropy_forward(lm_.forward(s[kN]), mb.targets, s[kProbs]);
    ctx.tokens = mb.targets;
    Mat out(1, 1);
    out(0, 0) = static_cast<float>(loss);
    return out;
  }

  Mat serve(const Mat& x, const ServeInput& in, int) override {
    std::vector<Eigen::Index> last;
    Eigen::Index row = 0;
    for (const SequenceChunk& chunk : *in.step) {
      row += chunk.tokens;
      if (chunk.samples) last.push_back(row - 1);
    }
    Mat picked(static_cast<Eigen::Index>(last.size()), x.cols());
    for (size_t i = 0; i < last.size(); ++i) picked.row(static_cast<Eigen::Index>(i)) = x.row(last[i]);
    Mat xhat, rstd;
    return lm_.forward(norm_.forward(picked, xhat, rstd));
  }

  Mat backward_input(const Mat&, LayerContext& ctx, double loss_scale, const GradSink& sink) override {
    std::vector<Mat>& s = ctx.saved;
    Mat dlogits = ops::cross_entropy_backward(s[kProbs], ctx.tokens, loss_scale);
    s[kProbs].resize(0, 0);
    const Mat dn = lm_.backward_input(dlogits);
    sink(lm_.term(std::move(s[kN]), std::move(dlogits)));
    Mat dx = norm_.backward_input(dn, s[kXhat], s[kRstd]);
    sink(norm_.term(std::move(s[kXhat]), dn));
    s.clear();
    ctx.tokens.clear();
    return dx;
  }

  std::vector<Param*> params() override {
    std::vector<Param*> out;
    norm_.collect(out);
    lm_.collect(out);
    return out;
  }

 private:
  Norm norm_;
  Linear lm_;
};

}  // namespace

void check_cpu_model(const Model& model) {
  if (!model.transformer || model.has_explicit_costs())
    throw_bad_input("--model: '{}' gives explicit per-layer costs and has no layers to compute; use a transformer "
                    "model (e.g. examples/tiny-llama.json) or --compute sleep",
                    model.name);
  const TransformerConfig& c = *model.transformer;
  const char* missing = c.mlp == MlpKind::ReluSquared ? "a squared-ReLU MLP"
                        : c.mlp == MlpKind::GeGlu     ? "a GeGLU MLP"
                        : c.qk_norm                   ? "query and key norms"
                        : c.attention_window > 0      ? "sliding-window attention"
                        : c.moe && c.moe->router_score_bias ? "a router score bias (e_score_correction_bias)"
                        : c.mla                       ? "multi-head latent attention"
                        : c.attention_sinks           ? "attention sinks"
                        : c.mtp_layers > 0            ? "multi-token-prediction layers"
                                                      : nullptr;
  if (missing)
    throw_bad_input("--model: '{}' has {}, which pipewright's layers do not compute; use --compute sleep", model.name,
                    missing);
}

// The name the Embedding gives its token table: the tied head draws its initial copy from the same stream.
static std::string tied_table_name(const Model& model) {
  return model.layers.front().name + ".tokens";
}

std::unique_ptr<CpuLayer> make_cpu_layer(const Model& model, int index, std::uint64_t seed, Recompute recompute,
                                         const ExpertShard& shard) {
  check_cpu_model(model);
  const Layer& layer = model.layers[static_cast<size_t>(index)];
  const TransformerConfig& c = *model.transformer;
  switch (layer.kind) {
    case LayerKind::Embedding: return std::make_unique<Embedding>(layer.name, c, seed);
    case LayerKind::Block: {
      std::unique_ptr<cpu::CpuMlp> mlp;
      if (c.moe_block(layer.block))
        mlp = std::make_unique<cpu::MoeMlp>(layer.name, c, shard, seed);
      else
        mlp = std::make_unique<cpu::DenseMlp>(layer.name, c.hidden, c.ffn, c.mlp, c.bias, seed);
      return std::make_unique<Block>(layer.name, c, seed, recompute, std::move(mlp));
    }
    case LayerKind::Head:
      return std::make_unique<Head>(layer.name, c, seed, c.tied_embeddings ? tied_table_name(model) : std::string());
    case LayerKind::Mtp:
    case LayerKind::Explicit: break;
  }
  throw_bad_input("--model: layer '{}' of '{}' has explicit costs; the cpu backend runs transformer layers only",
                  layer.name, model.name);
}

}  // namespace pw
