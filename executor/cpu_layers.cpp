#include "executor/cpu_layers.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

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

constexpr double kInitStd = 0.02;

Param make_param(const std::string& name, Eigen::Index rows, Eigen::Index cols, double fill, std::uint64_t seed,
                 bool random) {
  Param p;
  p.name = name;
  p.value.resize(rows, cols);
  if (random) {
    Rng rng(seed_for(seed, name));
    for (Eigen::Index i = 0; i < p.value.size(); ++i) p.value.data()[i] = static_cast<float>(kInitStd * rng.normal());
  } else {
    p.value.setConstant(static_cast<float>(fill));
  }
  p.grad.setZero(rows, cols);
  return p;
}

// A norm's scale (and, for LayerNorm, shift).
struct Norm {
  NormKind kind = NormKind::LayerNorm;
  Param gamma, beta;

  Norm(const std::string& name, NormKind k, int h, std::uint64_t seed) : kind(k) {
    gamma = make_param(name + ".gamma", 1, h, 1.0, seed, false);
    if (kind == NormKind::LayerNorm) beta = make_param(name + ".beta", 1, h, 0.0, seed, false);
  }
  bool has_beta() const { return kind == NormKind::LayerNorm; }
  Mat forward(const Mat& x, Mat& xhat, Mat& rstd) const {
    return ops::norm_forward(x, gamma.value, has_beta() ? &beta.value : nullptr, kind, xhat, rstd);
  }
  Mat backward_input(const Mat& dy, const Mat& xhat, const Mat& rstd) const {
    return ops::norm_backward_input(dy, gamma.value, xhat, rstd, kind);
  }
  WeightGradTerm term(Mat&& xhat, Mat dy) {
    return {WeightGradTerm::Kind::Norm, std::move(xhat), std::move(dy), {}, 0, &gamma, has_beta() ? &beta : nullptr};
  }
  void collect(std::vector<Param*>& out) {
    out.push_back(&gamma);
    if (has_beta()) out.push_back(&beta);
  }
};

struct Linear {
  Param w, b;
  bool bias = false;

  Linear(const std::string& name, int in, int out, bool with_bias, std::uint64_t seed) : bias(with_bias) {
    w = make_param(name + ".w", in, out, 0.0, seed, true);
    if (bias) b = make_param(name + ".b", 1, out, 0.0, seed, false);
  }
  Mat forward(const Mat& x) const { return ops::linear_forward(x, w.value, bias ? &b.value : nullptr); }
  Mat backward_input(const Mat& dy) const { return ops::linear_backward_input(dy, w.value); }
  WeightGradTerm term(Mat&& x, Mat dy) {
    return {WeightGradTerm::Kind::Linear, std::move(x), std::move(dy), {}, 0, &w, bias ? &b : nullptr};
  }
  void collect(std::vector<Param*>& out) {
    out.push_back(&w);
    if (bias) out.push_back(&b);
  }
};

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
  Block(const std::string& name, const TransformerConfig& c, std::uint64_t seed, Recompute recompute)
      : c_(c),
        recompute_(recompute),
        q_(c.heads * c.head_dim),
        kv_(c.kv_heads * c.head_dim),
        norm1_(name + ".norm1", c.norm, c.hidden, seed),
        norm2_(name + ".norm2", c.norm, c.hidden, seed),
        qkv_(name + ".qkv", c.hidden, q_ + 2 * kv_, c.bias || c.qkv_bias, seed),
        out_(name + ".out", q_, c.hidden, c.bias, seed),
        up_(name + ".up", c.hidden, c.mlp == MlpKind::SwiGlu ? 2 * c.ffn : c.ffn, c.bias, seed),
        down_(name + ".down", c.ffn, c.hidden, c.bias, seed) {}

  // Saved slots from F for B.
  enum Slot { kXhat1, kRstd1, kN1, kQ, kK, kV, kProbs, kO, kXhat2, kRstd2, kN2, kU, kG, kSlots };

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

  std::vector<Param*> params() override {
    std::vector<Param*> out;
    norm1_.collect(out);
    qkv_.collect(out);
    out_.collect(out);
    norm2_.collect(out);
    up_.collect(out);
    down_.collect(out);
    return out;
  }

 private:
  // F keeping every slot B needs in `s`. Recomputation runs it again, bit for bit, from the same input.
  Mat run_forward(const Mat& x, std::vector<Mat>& s) const {
    s.assign(kSlots, Mat());
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
    s[kU] = up_.forward(s[kN2]);
    s[kG] = c_.mlp == MlpKind::SwiGlu ? ops::swiglu(s[kU]) : ops::gelu(s[kU]);
    return x1 + down_.forward(s[kG]);
  }

  Mat run_backward(const Mat& dy, std::vector<Mat>& s, const GradSink& sink) {
    // MLP: y = x1 + down(act(up(norm2(x1)))).
    const Mat dg = down_.backward_input(dy);
    sink(down_.term(std::move(s[kG]), dy));
    Mat du = c_.mlp == MlpKind::SwiGlu ? ops::swiglu_backward(s[kU], dg) : ops::gelu_backward(s[kU], dg);
    const Mat dn2 = up_.backward_input(du);
    sink(up_.term(std::move(s[kN2]), std::move(du)));
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
  Linear qkv_, out_, up_, down_;
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
                        : c.moe                       ? "mixture-of-experts blocks"
                        : c.mla                       ? "multi-head latent attention"
                        : c.attention_sinks           ? "attention sinks"
                                                      : nullptr;
  if (missing)
    throw_bad_input("--model: '{}' has {}, which pipewright's layers do not compute; use --compute sleep", model.name,
                    missing);
}

// The name the Embedding gives its token table: the tied head draws its initial copy from the same stream.
static std::string tied_table_name(const Model& model) {
  return model.layers.front().name + ".tokens";
}

std::unique_ptr<CpuLayer> make_cpu_layer(const Model& model, int index, std::uint64_t seed, Recompute recompute) {
  check_cpu_model(model);
  const Layer& layer = model.layers[static_cast<size_t>(index)];
  const TransformerConfig& c = *model.transformer;
  switch (layer.kind) {
    case LayerKind::Embedding: return std::make_unique<Embedding>(layer.name, c, seed);
    case LayerKind::Block: return std::make_unique<Block>(layer.name, c, seed, recompute);
    case LayerKind::Head:
      return std::make_unique<Head>(layer.name, c, seed, c.tied_embeddings ? tied_table_name(model) : std::string());
    case LayerKind::Mtp:
    case LayerKind::Explicit: break;
  }
  throw_bad_input("--model: layer '{}' of '{}' has explicit costs; the cpu backend runs transformer layers only",
                  layer.name, model.name);
}

}  // namespace pw
