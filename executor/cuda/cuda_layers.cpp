#include "executor/cuda/cuda_layers.hpp"

#include <cmath>
#include <cstring>
#include <set>

#include "core/error.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/kernels.cuh"

namespace pw::cuda {

GpuContext::GpuContext(int dev, DType t) : device(dev), dtype(t), allocator(dev) {
  PW_CUDA(cudaSetDevice(device));
  PW_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  gemm = std::make_unique<Gemm>(stream, allocator);
}

GpuContext::~GpuContext() {
  gemm.reset();
  rotary_.clear();
  if (stream) cudaStreamDestroy(stream);
}

void GpuContext::synchronize() { PW_CUDA(cudaStreamSynchronize(stream)); }

std::pair<const float*, const float*> GpuContext::rotary(int seq, int head_dim) {
  auto it = rotary_.find({seq, head_dim});
  if (it == rotary_.end()) {
    // The CPU's angles (ops::rotary): position x 10000^(-2i / head_dim), in double, then float.
    const int half = head_dim / 2;
    std::vector<float> c(static_cast<size_t>(seq) * half), s(c.size());
    for (int pos = 0; pos < seq; ++pos)
      for (int i = 0; i < half; ++i) {
        const double angle = pos * std::pow(10000.0, -2.0 * i / head_dim);
        c[static_cast<size_t>(pos) * half + i] = static_cast<float>(std::cos(angle));
        s[static_cast<size_t>(pos) * half + i] = static_cast<float>(std::sin(angle));
      }
    BlockPtr cb = allocate_block(allocator, c.size() * sizeof(float));
    BlockPtr sb = allocate_block(allocator, s.size() * sizeof(float));
    // On the rank's stream: the blocks may have been freed by kernels still queued there.
    PW_CUDA(cudaMemcpyAsync(cb->data(), c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    PW_CUDA(cudaMemcpyAsync(sb->data(), s.data(), s.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    synchronize();  // the host tables go when this returns
    it = rotary_.emplace(std::make_pair(seq, head_dim), std::make_pair(cb, sb)).first;
  }
  return {static_cast<const float*>(it->second.first->data()), static_cast<const float*>(it->second.second->data())};
}

Buf make_buf(GpuContext& g, DType dtype, long rows, long cols) {
  Buf b;
  b.dtype = dtype;
  b.rows = rows;
  b.cols = cols;
  b.block = allocate_block(g.allocator, static_cast<std::size_t>(rows * cols) * dtype_bytes(dtype));
  return b;
}

namespace {

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

std::vector<float> download(GpuContext& g, const void* data, DType dtype, long count) {
  std::vector<float> out(static_cast<size_t>(count));
  g.synchronize();
  if (dtype == DType::F32) {
    PW_CUDA(cudaMemcpy(out.data(), data, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  } else {
    std::vector<std::uint16_t> raw(out.size());
    PW_CUDA(cudaMemcpy(raw.data(), data, raw.size() * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < raw.size(); ++i) out[i] = bf16_to_float(raw[i]);
  }
  return out;
}

bool layer_norm(NormKind k) { return k == NormKind::LayerNorm; }

const Param& find_param(const std::map<std::string, Param*>& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end()) throw_runtime("cuda layers: the CPU layer has no parameter '{}'", name);
  return *it->second;
}

GpuParam upload_param(GpuContext& g, const Param& p) {
  GpuParam q;
  q.name = p.name;
  q.rows = p.value.rows();
  q.cols = p.value.cols();
  const std::size_t bytes = static_cast<std::size_t>(q.count()) * sizeof(float);
  q.master = allocate_block(g.allocator, bytes);
  q.grad = allocate_block(g.allocator, bytes);
  // Stream-ordered after whatever last used the block; from pageable memory the call returns once the host
  // data is staged, so the CPU layer may go right after.
  PW_CUDA(cudaMemcpyAsync(q.master->data(), p.value.data(), bytes, cudaMemcpyHostToDevice, g.stream));
  PW_CUDA(cudaMemsetAsync(q.grad->data(), 0, bytes, g.stream));
  if (g.dtype == DType::F32) {
    q.compute = q.master;
  } else {
    q.compute = allocate_block(g.allocator, static_cast<std::size_t>(q.count()) * dtype_bytes(g.dtype));
    cast_from_f32(g.dtype, static_cast<const float*>(q.master->data()), q.count(), q.compute->data(), g.stream);
  }
  return q;
}

// y = x w (+ b): x is n x in, w in x out (GpuParam rows x cols).
Buf linear_forward(GpuContext& g, const Buf& x, const GpuParam& w, const GpuParam* b) {
  Buf y = make_buf(g, g.dtype, x.rows, w.cols);
  g.gemm->run(g.dtype, g.dtype, static_cast<int>(x.rows), static_cast<int>(w.cols), static_cast<int>(w.rows),
              {x.data(), static_cast<int>(x.cols), false, 0}, {w.compute->data(), static_cast<int>(w.cols), false, 0},
              y.data(), static_cast<int>(y.cols), 0, 1.0f, 0.0f);
  if (b) add_bias(g.dtype, y.data(), b->compute->data(), static_cast<int>(y.rows), static_cast<int>(y.cols), g.stream);
  return y;
}

// residual + x w (+ b), the residual copied into the output first.
Buf linear_residual(GpuContext& g, const Buf& x, const GpuParam& w, const GpuParam* b, const Buf& residual) {
  Buf y = make_buf(g, g.dtype, x.rows, w.cols);
  PW_CUDA(cudaMemcpyAsync(y.data(), residual.data(), static_cast<std::size_t>(y.elements()) * dtype_bytes(g.dtype),
                          cudaMemcpyDeviceToDevice, g.stream));
  g.gemm->run(g.dtype, g.dtype, static_cast<int>(x.rows), static_cast<int>(w.cols), static_cast<int>(w.rows),
              {x.data(), static_cast<int>(x.cols), false, 0}, {w.compute->data(), static_cast<int>(w.cols), false, 0},
              y.data(), static_cast<int>(y.cols), 0, 1.0f, 1.0f);
  if (b) add_bias(g.dtype, y.data(), b->compute->data(), static_cast<int>(y.rows), static_cast<int>(y.cols), g.stream);
  return y;
}

// dx = dy w^T.
Buf linear_backward_input(GpuContext& g, const Buf& dy, const GpuParam& w) {
  Buf dx = make_buf(g, g.dtype, dy.rows, w.rows);
  g.gemm->run(g.dtype, g.dtype, static_cast<int>(dy.rows), static_cast<int>(w.rows), static_cast<int>(w.cols),
              {dy.data(), static_cast<int>(dy.cols), false, 0}, {w.compute->data(), static_cast<int>(w.cols), true, 0},
              dx.data(), static_cast<int>(dx.cols), 0, 1.0f, 0.0f);
  return dx;
}

struct GpuNorm {
  NormKind kind;
  GpuParam gamma, beta;
  bool has_beta() const { return kind == NormKind::LayerNorm; }

  GpuNorm(GpuContext& g, const std::map<std::string, Param*>& params, const std::string& name, NormKind k) : kind(k) {
    gamma = upload_param(g, find_param(params, name + ".gamma"));
    if (has_beta()) beta = upload_param(g, find_param(params, name + ".beta"));
  }
  // Returns y; keeps x-hat and 1 / std in `xhat`, `rstd`.
  Buf forward(GpuContext& g, const Buf& x, Buf& xhat, Buf& rstd) const {
    xhat = make_buf(g, g.dtype, x.rows, x.cols);
    rstd = make_buf(g, DType::F32, x.rows, 1);
    Buf y = make_buf(g, g.dtype, x.rows, x.cols);
    norm_forward(g.dtype, layer_norm(kind), x.data(), gamma.compute->data(), has_beta() ? beta.compute->data() : nullptr,
                 static_cast<int>(x.rows), static_cast<int>(x.cols), xhat.data(), static_cast<float*>(rstd.data()), y.data(),
                 g.stream);
    return y;
  }
  Buf backward_input(GpuContext& g, const Buf& dy, const Buf& xhat, const Buf& rstd, const Buf* residual) const {
    Buf dx = make_buf(g, g.dtype, dy.rows, dy.cols);
    norm_backward_input(g.dtype, layer_norm(kind), dy.data(), gamma.compute->data(), xhat.data(),
                        static_cast<const float*>(rstd.data()), residual ? residual->data() : nullptr,
                        static_cast<int>(dy.rows), static_cast<int>(dy.cols), dx.data(), g.stream);
    return dx;
  }
  GpuWeightTerm term(Buf xhat, Buf dy) {
    return {WeightGradTerm::Kind::Norm, std::move(xhat), std::move(dy), nullptr, 0, &gamma, has_beta() ? &beta : nullptr};
  }
  void collect(std::vector<GpuParam*>& out) {
    out.push_back(&gamma);
    if (has_beta()) out.push_back(&beta);
  }
};

struct GpuLinear {
  GpuParam w, b;
  bool bias = false;
  GpuLinear(GpuContext& g, const std::map<std::string, Param*>& params, const std::string& name, bool with_bias)
      : bias(with_bias) {
    w = upload_param(g, find_param(params, name + ".w"));
    if (bias) b = upload_param(g, find_param(params, name + ".b"));
  }
  const GpuParam* bias_param() const { return bias ? &b : nullptr; }
  GpuWeightTerm term(Buf x, Buf dy) {
    return {WeightGradTerm::Kind::Linear, std::move(x), std::move(dy), nullptr, 0, &w, bias ? &b : nullptr};
  }
  void collect(std::vector<GpuParam*>& out) {
    out.push_back(&w);
    if (bias) out.push_back(&b);
  }
};

std::map<std::string, Param*> params_by_name(CpuLayer& cpu) {
  std::map<std::string, Param*> out;
  for (Param* p : cpu.params()) out[p->name] = p;
  return out;
}

class GpuEmbedding : public GpuLayer {
 public:
  GpuEmbedding(GpuContext& g, const std::string& name, const TransformerConfig& c, CpuLayer& cpu) : g_(g), c_(c) {
    const auto params = params_by_name(cpu);
    tokens_ = upload_param(g, find_param(params, name + ".tokens"));
    if (c.learned_positions) positions_ = upload_param(g, find_param(params, name + ".positions"));
  }

  Buf forward(const Buf&, const GpuBatch& batch, GpuLayerContext& ctx) override {
    const long n = static_cast<long>(batch.batch) * batch.seq;
    Buf x = make_buf(g_, g_.dtype, n, c_.hidden);
    embedding_forward(g_.dtype, static_cast<const int*>(batch.tokens->data()), tokens_.compute->data(),
                      c_.learned_positions ? positions_.compute->data() : nullptr, static_cast<int>(n), c_.hidden,
                      batch.seq, x.data(), g_.stream);
    ctx.tokens = batch.tokens;
    seq_ = batch.seq;
    return x;
  }

  Buf backward_input(const Buf& dy, GpuLayerContext& ctx, double, const GpuSink& sink) override {
    sink(GpuWeightTerm{WeightGradTerm::Kind::Embedding, Buf{}, dy, std::move(ctx.tokens), seq_, &tokens_,
                       c_.learned_positions ? &positions_ : nullptr});
    ctx.tokens.reset();
    return Buf{};
  }

  std::vector<GpuParam*> params() override {
    std::vector<GpuParam*> out{&tokens_};
    if (c_.learned_positions) out.push_back(&positions_);
    return out;
  }

 private:
  GpuContext& g_;
  TransformerConfig c_;
  GpuParam tokens_, positions_;
  int seq_ = 1;
};

class GpuBlock : public GpuLayer {
 public:
  GpuBlock(GpuContext& g, const std::string& name, const TransformerConfig& c, const std::map<std::string, Param*>& p,
           Recompute recompute)
      : g_(g),
        c_(c),
        recompute_(recompute),
        q_(c.heads * c.head_dim),
        kv_(c.kv_heads * c.head_dim),
        norm1_(g, p, name + ".norm1", c.norm),
        norm2_(g, p, name + ".norm2", c.norm),
        qkv_(g, p, name + ".qkv", c.bias || c.qkv_bias),
        out_(g, p, name + ".out", c.bias),
        up_(g, p, name + ".up", c.bias),
        down_(g, p, name + ".down", c.bias),
        name_(name) {}

  enum Slot { kXhat1, kRstd1, kN1, kQh, kKh, kVh, kProbs, kO, kXhat2, kRstd2, kN2, kU, kG, kSlots };

  Buf forward(const Buf& x, const GpuBatch& batch, GpuLayerContext& ctx) override {
    if (batch.batch <= 0 || static_cast<long>(batch.batch) * batch.seq != x.rows)
      throw_runtime("cuda block {}: {} rows are not {} sequences of {} tokens", name_, x.rows, batch.batch, batch.seq);
    batch_ = batch.batch;
    seq_ = batch.seq;
    if (recompute_ == Recompute::Full) {
      // Only the block's input stays; B rebuilds everything else from it.
      std::vector<Buf> scratch;
      Buf y = run_forward(x, scratch);
      ctx.saved.assign(1, x);
      return y;
    }
    Buf y = run_forward(x, ctx.saved);
    // The probabilities, the s x s part, are rebuilt in B from Q and K.
    if (recompute_ == Recompute::Selective) ctx.saved[kProbs] = Buf{};
    return y;
  }

  Buf backward_input(const Buf& dy, GpuLayerContext& ctx, double, const GpuSink& sink) override {
    std::vector<Buf>& s = ctx.saved;
    if (recompute_ == Recompute::Full) {
      const Buf x = std::move(s.front());
      run_forward(x, s);  // the same kernels on the same input: the same activations, bit for bit
    } else if (recompute_ == Recompute::Selective) {
      s[kProbs] = attention_probs(s[kQh], s[kKh]);
    }
    return run_backward(dy, s, sink);
  }

 private:
  // The causal softmax of scale Q K^T per (sequence, head): scores in fp32, the probabilities in the
  // activation type.
  Buf attention_probs(const Buf& qh, const Buf& kh) {
    const int H = c_.heads, hd = c_.head_dim, S = seq_;
    const long heads_rows = static_cast<long>(batch_) * H * S;
    const long long qs = static_cast<long long>(S) * hd, ss = static_cast<long long>(S) * S;
    Buf scores = make_buf(g_, DType::F32, heads_rows, S);
    g_.gemm->run(g_.dtype, DType::F32, S, S, hd, {qh.data(), hd, false, qs}, {kh.data(), hd, true, qs}, scores.data(), S,
                 ss, scale(), 0.0f, batch_ * H);
    Buf probs = make_buf(g_, g_.dtype, heads_rows, S);
    causal_softmax(g_.dtype, static_cast<const float*>(scores.data()), heads_rows, S, probs.data(), g_.stream);
    return probs;
  }

  // F keeping every slot B needs in `s`.
  Buf run_forward(const Buf& x, std::vector<Buf>& s) {
    s.assign(kSlots, Buf{});
    const long n = x.rows;
    const int H = c_.heads, hd = c_.head_dim, S = seq_;
    const long heads_rows = static_cast<long>(batch_) * H * S;
    const int bh = batch_ * H;
    s[kN1] = norm1_.forward(g_, x, s[kXhat1], s[kRstd1]);
    Buf qkv = linear_forward(g_, s[kN1], qkv_.w, qkv_.bias_param());
    s[kQh] = make_buf(g_, g_.dtype, heads_rows, hd);
    s[kKh] = make_buf(g_, g_.dtype, heads_rows, hd);
    s[kVh] = make_buf(g_, g_.dtype, heads_rows, hd);
    const auto rot = c_.learned_positions ? std::pair<const float*, const float*>{nullptr, nullptr} : g_.rotary(S, hd);
    attention_split(g_.dtype, qkv.data(), rot.first, rot.second, batch_, S, H, c_.kv_heads, hd, s[kQh].data(),
                    s[kKh].data(), s[kVh].data(), g_.stream);
    qkv = Buf{};
    const long long qs = static_cast<long long>(S) * hd, ss = static_cast<long long>(S) * S;
    s[kProbs] = attention_probs(s[kQh], s[kKh]);
    Buf oh = make_buf(g_, DType::F32, heads_rows, hd);
    g_.gemm->run(g_.dtype, DType::F32, S, hd, S, {s[kProbs].data(), S, false, ss}, {s[kVh].data(), hd, false, qs},
                 oh.data(), hd, qs, 1.0f, 0.0f, bh);
    s[kO] = make_buf(g_, g_.dtype, n, q_);
    attention_merge(g_.dtype, static_cast<const float*>(oh.data()), batch_, S, H, hd, s[kO].data(), g_.stream);
    oh = Buf{};
    const Buf x1 = linear_residual(g_, s[kO], out_.w, out_.bias_param(), x);
    s[kN2] = norm2_.forward(g_, x1, s[kXhat2], s[kRstd2]);
    s[kU] = linear_forward(g_, s[kN2], up_.w, up_.bias_param());
    s[kG] = make_buf(g_, g_.dtype, n, c_.ffn);
    if (c_.mlp == MlpKind::SwiGlu)
      swiglu_forward(g_.dtype, s[kU].data(), n, c_.ffn, s[kG].data(), g_.stream);
    else
      gelu_forward(g_.dtype, s[kU].data(), s[kU].elements(), s[kG].data(), g_.stream);
    return linear_residual(g_, s[kG], down_.w, down_.bias_param(), x1);
  }

  Buf run_backward(const Buf& dy, std::vector<Buf>& s, const GpuSink& sink) {
    const long n = dy.rows;
    const int H = c_.heads, hd = c_.head_dim, S = seq_;
    const long heads_rows = static_cast<long>(batch_) * H * S;
    const int bh = batch_ * H;
    const long long qs = static_cast<long long>(S) * hd, ss = static_cast<long long>(S) * S;
    // MLP: y = x1 + down(act(up(norm2(x1)))).
    Buf dg = linear_backward_input(g_, dy, down_.w);
    sink(down_.term(std::move(s[kG]), dy));
    Buf du = make_buf(g_, g_.dtype, n, s[kU].cols);
    if (c_.mlp == MlpKind::SwiGlu)
      swiglu_backward(g_.dtype, s[kU].data(), dg.data(), n, c_.ffn, du.data(), g_.stream);
    else
      gelu_backward(g_.dtype, s[kU].data(), dg.data(), du.elements(), du.data(), g_.stream);
    dg = Buf{};
    s[kU] = Buf{};
    Buf dn2 = linear_backward_input(g_, du, up_.w);
    sink(up_.term(std::move(s[kN2]), std::move(du)));
    Buf dx1 = norm2_.backward_input(g_, dn2, s[kXhat2], s[kRstd2], &dy);
    sink(norm2_.term(std::move(s[kXhat2]), std::move(dn2)));
    s[kRstd2] = Buf{};
    // Attention: x1 = x + out(attention(rotary(qkv(norm1(x))))).
    Buf dO = linear_backward_input(g_, dx1, out_.w);
    sink(out_.term(std::move(s[kO]), dx1));
    Buf doh = make_buf(g_, g_.dtype, heads_rows, hd);
    attention_split_grad(g_.dtype, dO.data(), batch_, S, H, hd, doh.data(), g_.stream);
    dO = Buf{};
    Buf dprobs = make_buf(g_, DType::F32, heads_rows, S);
    g_.gemm->run(g_.dtype, DType::F32, S, S, hd, {doh.data(), hd, false, qs}, {s[kVh].data(), hd, true, qs},
                 dprobs.data(), S, ss, 1.0f, 0.0f, bh);
    Buf dvh = make_buf(g_, DType::F32, heads_rows, hd);
    g_.gemm->run(g_.dtype, DType::F32, S, hd, S, {s[kProbs].data(), S, true, ss}, {doh.data(), hd, false, qs}, dvh.data(),
                 hd, qs, 1.0f, 0.0f, bh);
    doh = Buf{};
    Buf dscores = make_buf(g_, g_.dtype, heads_rows, S);
    softmax_backward(g_.dtype, s[kProbs].data(), static_cast<const float*>(dprobs.data()), scale(), heads_rows, S,
                     dscores.data(), g_.stream);
    dprobs = Buf{};
    s[kProbs] = Buf{};
    Buf dqh = make_buf(g_, DType::F32, heads_rows, hd);
    g_.gemm->run(g_.dtype, DType::F32, S, hd, S, {dscores.data(), S, false, ss}, {s[kKh].data(), hd, false, qs},
                 dqh.data(), hd, qs, 1.0f, 0.0f, bh);
    Buf dkh = make_buf(g_, DType::F32, heads_rows, hd);
    g_.gemm->run(g_.dtype, DType::F32, S, hd, S, {dscores.data(), S, true, ss}, {s[kQh].data(), hd, false, qs},
                 dkh.data(), hd, qs, 1.0f, 0.0f, bh);
    dscores = Buf{};
    Buf dqkv = make_buf(g_, g_.dtype, n, q_ + 2 * kv_);
    const auto rot = c_.learned_positions ? std::pair<const float*, const float*>{nullptr, nullptr} : g_.rotary(S, hd);
    attention_merge_grad(g_.dtype, static_cast<const float*>(dqh.data()), static_cast<const float*>(dkh.data()),
                         static_cast<const float*>(dvh.data()), rot.first, rot.second, batch_, S, H, c_.kv_heads, hd,
                         dqkv.data(), g_.stream);
    Buf dn1 = linear_backward_input(g_, dqkv, qkv_.w);
    sink(qkv_.term(std::move(s[kN1]), std::move(dqkv)));
    Buf dx = norm1_.backward_input(g_, dn1, s[kXhat1], s[kRstd1], &dx1);
    sink(norm1_.term(std::move(s[kXhat1]), std::move(dn1)));
    s.clear();
    return dx;
  }

 public:
  std::vector<GpuParam*> params() override {
    std::vector<GpuParam*> out;
    norm1_.collect(out);
    qkv_.collect(out);
    out_.collect(out);
    norm2_.collect(out);
    up_.collect(out);
    down_.collect(out);
    return out;
  }

 private:
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(c_.head_dim)); }

  GpuContext& g_;
  TransformerConfig c_;
  Recompute recompute_;
  int q_, kv_;
  GpuNorm norm1_, norm2_;
  GpuLinear qkv_, out_, up_, down_;
  int batch_ = 1, seq_ = 1;
  std::string name_;
};

class GpuHead : public GpuLayer {
 public:
  GpuHead(GpuContext& g, const std::string& name, const TransformerConfig& c, const std::map<std::string, Param*>& p)
      : g_(g), c_(c), norm_(g, p, name + ".norm", c.norm), lm_(g, p, name + ".lm", false) {}

  enum Slot { kXhat, kRstd, kN, kLogits, kLse, kSlots };

  Buf forward(const Buf& x, const GpuBatch& batch, GpuLayerContext& ctx) override {
    std::vector<Buf>& s = ctx.saved;
    s.assign(kSlots, Buf{});
    s[kN] = norm_.forward(g_, x, s[kXhat], s[kRstd]);
    s[kLogits] = linear_forward(g_, s[kN], lm_.w, nullptr);
    s[kLse] = make_buf(g_, DType::F32, x.rows, 1);
    Buf loss = make_buf(g_, DType::F32, 1, 1);
    PW_CUDA(cudaMemsetAsync(loss.data(), 0, sizeof(float), g_.stream));
    cross_entropy_forward(g_.dtype, s[kLogits].data(), static_cast<const int*>(batch.targets->data()),
                          static_cast<int>(x.rows), c_.vocab, static_cast<float*>(s[kLse].data()),
                          static_cast<float*>(loss.data()), g_.stream);
    ctx.tokens = batch.targets;
    return loss;
  }

  Buf backward_input(const Buf&, GpuLayerContext& ctx, double loss_scale, const GpuSink& sink) override {
    std::vector<Buf>& s = ctx.saved;
    const long n = s[kLogits].rows;
    Buf dlogits = make_buf(g_, g_.dtype, n, c_.vocab);
    cross_entropy_backward(g_.dtype, s[kLogits].data(), static_cast<const float*>(s[kLse].data()),
                           static_cast<const int*>(ctx.tokens->data()), static_cast<int>(n), c_.vocab,
                           static_cast<float>(loss_scale), dlogits.data(), g_.stream);
    s[kLogits] = Buf{};
    s[kLse] = Buf{};
    Buf dn = linear_backward_input(g_, dlogits, lm_.w);
    sink(lm_.term(std::move(s[kN]), std::move(dlogits)));
    Buf dx = norm_.backward_input(g_, dn, s[kXhat], s[kRstd], nullptr);
    sink(norm_.term(std::move(s[kXhat]), std::move(dn)));
    s.clear();
    ctx.tokens.reset();
    return dx;
  }

  std::vector<GpuParam*> params() override {
    std::vector<GpuParam*> out;
    norm_.collect(out);
    lm_.collect(out);
    return out;
  }

 private:
  GpuContext& g_;
  TransformerConfig c_;
  GpuNorm norm_;
  GpuLinear lm_;
};

}  // namespace

std::vector<float> download_f32(GpuContext& g, const Buf& b) { return download(g, b.data(), b.dtype, b.elements()); }

std::vector<float> download_param(GpuContext& g, const GpuParam& p, bool gradient) {
  return download(g, gradient ? p.grad->data() : p.master->data(), DType::F32, p.count());
}

GpuBatch upload_batch(GpuContext& g, const MicroBatch& mb) {
  GpuBatch b;
  b.batch = mb.batch;
  b.seq = mb.seq;
  const std::size_t bytes = mb.tokens.size() * sizeof(int);
  b.tokens = allocate_block(g.allocator, bytes);
  b.targets = allocate_block(g.allocator, bytes);
  // Stream-ordered; from pageable memory the call returns once the host data is staged, so the host vectors
  // may go right after.
  PW_CUDA(cudaMemcpyAsync(b.tokens->data(), mb.tokens.data(), bytes, cudaMemcpyHostToDevice, g.stream));
  PW_CUDA(cudaMemcpyAsync(b.targets->data(), mb.targets.data(), bytes, cudaMemcpyHostToDevice, g.stream));
  return b;
}

void apply(GpuContext& g, const GpuWeightTerm& t) {
  switch (t.kind) {
    case WeightGradTerm::Kind::Linear: {
      GpuParam& w = *t.weight;
      // dW (in x out, fp32) += X^T dY.
      g.gemm->run(g.dtype, DType::F32, static_cast<int>(w.rows), static_cast<int>(w.cols), static_cast<int>(t.input.rows),
                  {t.input.data(), static_cast<int>(t.input.cols), true, 0}, {t.grad.data(), static_cast<int>(t.grad.cols), false, 0},
                  w.grad->data(), static_cast<int>(w.cols), 0, 1.0f, 1.0f);
      if (t.bias)
        column_sums(g.dtype, t.grad.data(), nullptr, static_cast<int>(t.grad.rows), static_cast<int>(t.grad.cols), nullptr,
                    static_cast<float*>(t.bias->grad->data()), g.stream);
      break;
    }
    case WeightGradTerm::Kind::Norm:
      column_sums(g.dtype, t.grad.data(), t.input.data(), static_cast<int>(t.grad.rows), static_cast<int>(t.grad.cols),
                  static_cast<float*>(t.weight->grad->data()), t.bias ? static_cast<float*>(t.bias->grad->data()) : nullptr,
                  g.stream);
      break;
    case WeightGradTerm::Kind::Embedding:
      embedding_backward_weight(g.dtype, static_cast<const int*>(t.tokens->data()), t.grad.data(),
                                static_cast<int>(t.grad.rows), static_cast<int>(t.grad.cols), t.seq,
                                static_cast<float*>(t.weight->grad->data()),
                                t.bias ? static_cast<float*>(t.bias->grad->data()) : nullptr, g.stream);
      break;
  }
}

double GpuLayerContext::bytes() const {
  std::set<const DeviceBlock*> seen;
  double total = 0;
  const auto count = [&](const BlockPtr& b) {
    if (b && seen.insert(b.get()).second) total += static_cast<double>(BlockPool::rounded(b->bytes()));
  };
  for (const Buf& b : saved) count(b.block);
  count(tokens);
  for (const GpuWeightTerm& t : pending) {
    count(t.input.block);
    count(t.grad.block);
    count(t.tokens);
  }
  return total;
}

void check_gpu_model(const Model& model) {
  if (!model.transformer || model.has_explicit_costs())
    throw_bad_input("--model: '{}' gives explicit per-layer costs and has no layers to compute; use a transformer "
                    "model (e.g. examples/tiny-llama.json) or --compute sleep",
                    model.name);
  const TransformerConfig& c = *model.transformer;
  if (!c.learned_positions && c.head_dim % 2 != 0)
    throw_bad_input("--model: '{}' has head_dim {}; rotary positions need an even head_dim", model.name, c.head_dim);
  if (c.moe || c.mla || c.mtp_layers > 0 || c.attention_sinks)
    throw_bad_input("--model: '{}' has {}, which the cuda backend's layers do not compute; use --compute sleep", model.name,
                    c.moe ? "mixture-of-experts blocks" : c.mla ? "multi-head latent attention"
                          : c.mtp_layers > 0 ? "multi-token-prediction modules" : "attention sinks");
  if (c.kv_heads < 1 || c.heads % c.kv_heads != 0)
    throw_bad_input("--model: '{}' has {} heads and {} kv_heads; heads must be a multiple of kv_heads", model.name,
                    c.heads, c.kv_heads);
}

std::unique_ptr<GpuLayer> make_gpu_layer(GpuContext& g, const Model& model, int index, CpuLayer& cpu, Recompute recompute) {
  check_gpu_model(model);
  const Layer& layer = model.layers[static_cast<size_t>(index)];
  const TransformerConfig& c = *model.transformer;
  const auto params = params_by_name(cpu);
  switch (layer.kind) {
    case LayerKind::Embedding: return std::make_unique<GpuEmbedding>(g, layer.name, c, cpu);
    case LayerKind::Block: return std::make_unique<GpuBlock>(g, layer.name, c, params, recompute);
    case LayerKind::Head: return std::make_unique<GpuHead>(g, layer.name, c, params);
    case LayerKind::Mtp:
    case LayerKind::Explicit: break;
  }
  throw_bad_input("--model: layer '{}' of '{}' has explicit costs; the cuda backend runs transformer layers only",
                  layer.name, model.name);
}

void optimizer_step(GpuContext& g, const OptimizerConfig& c, const std::vector<GpuParam*>& params) {
  for (GpuParam* p : params) {
    ++p->steps;
    float* w = static_cast<float*>(p->master->data());
    float* grad = static_cast<float*>(p->grad->data());
    if (c.kind == OptimizerKind::Sgd) {
      sgd_step(w, grad, p->count(), static_cast<float>(c.lr), g.stream);
    } else {
      if (!p->adam_m) {
        const std::size_t bytes = static_cast<std::size_t>(p->count()) * sizeof(float);
        p->adam_m = allocate_block(g.allocator, bytes);
        p->adam_v = allocate_block(g.allocator, bytes);
        PW_CUDA(cudaMemsetAsync(p->adam_m->data(), 0, bytes, g.stream));
        PW_CUDA(cudaMemsetAsync(p->adam_v->data(), 0, bytes, g.stream));
      }
      adam_step(w, grad, static_cast<float*>(p->adam_m->data()), static_cast<float*>(p->adam_v->data()), p->count(),
                static_cast<float>(c.lr), static_cast<float>(c.beta1), static_cast<float>(c.beta2),
                static_cast<float>(c.eps), static_cast<float>(1 - std::pow(c.beta1, p->steps)),
                static_cast<float>(1 - std::pow(c.beta2, p->steps)), g.stream);
    }
    if (p->compute != p->master) cast_from_f32(g.dtype, w, p->count(), p->compute->data(), g.stream);
  }
  g.synchronize();
}

}  // namespace pw::cuda
