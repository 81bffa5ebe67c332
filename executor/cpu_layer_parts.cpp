#include "executor/cpu_layer_parts.hpp"

namespace pw::cpu {

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

Norm::Norm(const std::string& name, NormKind k, int h, std::uint64_t seed) : kind(k) {
  gamma = make_param(name + ".gamma", 1, h, 1.0, seed, false);
  if (kind == NormKind::LayerNorm) beta = make_param(name + ".beta", 1, h, 0.0, seed, false);
}

Mat Norm::forward(const Mat& x, Mat& xhat, Mat& rstd) const {
  return ops::norm_forward(x, gamma.value, has_beta() ? &beta.value : nullptr, kind, xhat, rstd);
}

Mat Norm::backward_input(const Mat& dy, const Mat& xhat, const Mat& rstd) const {
  return ops::norm_backward_input(dy, gamma.value, xhat, rstd, kind);
}

WeightGradTerm Norm::term(Mat&& xhat, Mat dy) {
  return {WeightGradTerm::Kind::Norm, std::move(xhat), std::move(dy), {}, 0, &gamma, has_beta() ? &beta : nullptr};
}

void Norm::collect(std::vector<Param*>& out) {
  out.push_back(&gamma);
  if (has_beta()) out.push_back(&beta);
}

Linear::Linear(const std::string& name, int in, int out, bool with_bias, std::uint64_t seed) : bias(with_bias) {
  w = make_param(name + ".w", in, out, 0.0, seed, true);
  if (bias) b = make_param(name + ".b", 1, out, 0.0, seed, false);
}

WeightGradTerm Linear::term(Mat&& x, Mat dy) {
  return {WeightGradTerm::Kind::Linear, std::move(x), std::move(dy), {}, 0, &w, bias ? &b : nullptr};
}

void Linear::collect(std::vector<Param*>& out) {
  out.push_back(&w);
  if (bias) out.push_back(&b);
}

Mat activation(MlpKind mlp, const Mat& u) { return mlp == MlpKind::SwiGlu ? ops::swiglu(u) : ops::gelu(u); }

Mat activation_backward(MlpKind mlp, const Mat& u, const Mat& dg) {
  return mlp == MlpKind::SwiGlu ? ops::swiglu_backward(u, dg) : ops::gelu_backward(u, dg);
}

DenseMlp::DenseMlp(const std::string& name, int hidden, int ffn, MlpKind mlp, bool bias, std::uint64_t seed)
    : mlp_(mlp),
      up_(name + ".up", hidden, mlp == MlpKind::SwiGlu ? 2 * ffn : ffn, bias, seed),
      down_(name + ".down", ffn, hidden, bias, seed) {}

Mat DenseMlp::forward(const Mat& n, Mat* s) {
  s[kU] = up_.forward(n);
  s[kG] = activation(mlp_, s[kU]);
  return down_.forward(s[kG]);
}

Mat DenseMlp::backward(const Mat& dy, Mat& n, Mat* s, const GradSink& sink) {
  const Mat dg = down_.backward_input(dy);
  sink(down_.term(std::move(s[kG]), dy));
  Mat du = activation_backward(mlp_, s[kU], dg);
  Mat dn = up_.backward_input(du);
  sink(up_.term(std::move(n), std::move(du)));
  return dn;
}

void DenseMlp::collect(std::vector<Param*>& out) {
  up_.collect(out);
  down_.collect(out);
}

}  // namespace pw::cpu
