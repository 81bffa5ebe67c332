#include "executor/cpu_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pw::ops {

Mat norm_forward(const Mat& x, const Mat& gamma, const Mat* beta, NormKind kind, Mat& xhat, Mat& rstd) {
  const Eigen::Index n = x.rows();
  const float h = static_cast<float>(x.cols());
  xhat.resize(n, x.cols());
  rstd.resize(n, 1);
  for (Eigen::Index r = 0; r < n; ++r) {
    if (kind == NormKind::LayerNorm) {
      const float mean = x.row(r).sum() / h;
      const auto centred = x.row(r).array() - mean;
      const float var = centred.square().sum() / h;
      rstd(r, 0) = 1.0f / std::sqrt(var + kNormEps);
      xhat.row(r) = centred * rstd(r, 0);
    } else {
      const float ms = x.row(r).squaredNorm() / h;
      rstd(r, 0) = 1.0f / std::sqrt(ms + kNormEps);
      xhat.row(r) = x.row(r) * rstd(r, 0);
    }
  }
  Mat y = xhat.array().rowwise() * gamma.row(0).array();
  if (beta) y.rowwise() += beta->row(0);
  return y;
}

Mat norm_backward_input(const Mat& dy, const Mat& gamma, const Mat& xhat, const Mat& rstd, NormKind kind) {
  const float h = static_cast<float>(dy.cols());
  const Mat g = dy.array().rowwise() * gamma.row(0).array();
  Mat dx(dy.rows(), dy.cols());
  for (Eigen::Index r = 0; r < dy.rows(); ++r) {
    const float mean_gx = g.row(r).dot(xhat.row(r)) / h;
    if (kind == NormKind::LayerNorm) {
      const float mean_g = g.row(r).sum() / h;
      dx.row(r) = rstd(r, 0) * (g.row(r).array() - mean_g - xhat.row(r).array() * mean_gx);
    } else {
      dx.row(r) = rstd(r, 0) * (g.row(r).array() - xhat.row(r).array() * mean_gx);
    }
  }
  return dx;
}

void norm_backward_weight(const Mat& dy, const Mat& xhat, Mat& dgamma, Mat* dbeta) {
  dgamma += (dy.array() * xhat.array()).colwise().sum().matrix();
  if (dbeta) *dbeta += dy.colwise().sum();
}

Mat linear_forward(const Mat& x, const Mat& w, const Mat* b) {
  Mat y = x * w;
  if (b) y.rowwise() += b->row(0);
  return y;
}

Mat linear_backward_input(const Mat& dy, const Mat& w) { return dy * w.transpose(); }

void linear_backward_weight(const Mat& x, const Mat& dy, Mat& dw, Mat* db) {
  dw.noalias() += x.transpose() * dy;
  if (db) *db += dy.colwise().sum();
}

namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

Mat gelu(const Mat& u) {
  return u.unaryExpr([](float x) { return 0.5f * x * (1.0f + std::tanh(kGeluC * (x + kGeluA * x * x * x))); });
}

Mat gelu_backward(const Mat& u, const Mat& dy) {
  const Mat d = u.unaryExpr([](float x) {
    const float t = std::tanh(kGeluC * (x + kGeluA * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  });
  return dy.cwiseProduct(d);
}

Mat swiglu(const Mat& u) {
  const Eigen::Index f = u.cols() / 2;
  Mat y(u.rows(), f);
  for (Eigen::Index r = 0; r < u.rows(); ++r)
    for (Eigen::Index c = 0; c < f; ++c) {
      const float g = u(r, c);
      y(r, c) = g * sigmoid(g) * u(r, f + c);
    }
  return y;
}

Mat swiglu_backward(const Mat& u, const Mat& dy) {
  const Eigen::Index f = u.cols() / 2;
  Mat du(u.rows(), u.cols());
  for (Eigen::Index r = 0; r < u.rows(); ++r)
    for (Eigen::Index c = 0; c < f; ++c) {
      const float g = u(r, c);
      const float up = u(r, f + c);
      const float s = sigmoid(g);
      du(r, c) = dy(r, c) * up * s * (1.0f + g * (1.0f - s));  // d silu(g) / dg = s (1 + g (1 - s))
      du(r, f + c) = dy(r, c) * g * s;
    }
  return du;
}

namespace {

// Rotates row r of x by the angle of position pos(r).
template <class Position>
void rotate_rows(Mat& x, int heads, int head_dim, bool inverse, const Position& pos) {
  const int half = head_dim / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double p = static_cast<double>(pos(r));
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / head_dim);
      const float c = static_cast<float>(std::cos(angle));
      const float s = sign * static_cast<float>(std::sin(angle));
      for (int j = 0; j < heads; ++j) {
        float& a = x(r, j * head_dim + i);
        float& b = x(r, j * head_dim + half + i);
        const float x0 = a, x1 = b;
        a = x0 * c - x1 * s;
        b = x1 * c + x0 * s;
      }
    }
  }
}

}  // namespace

void rotary(Mat& x, int heads, int head_dim, int seq, bool inverse) {
  rotate_rows(x, heads, head_dim, inverse, [seq](Eigen::Index r) { return r % seq; });
}

void rotary_at(Mat& x, int heads, int head_dim, const std::vector<long>& positions) {
  rotate_rows(x, heads, head_dim, false, [&](Eigen::Index r) { return positions[static_cast<size_t>(r)]; });
}

Mat cached_attention(const Mat& q, const Mat& k, const Mat& v, long start, const AttentionShape& sh) {
  const int hd = sh.head_dim, group = sh.heads / sh.kv_heads;
  const Eigen::Index rows = q.rows(), seen = start + rows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  Mat out(rows, q.cols());
  for (int j = 0; j < sh.heads; ++j) {
    const int g = j / group;
    const auto K = k.block(0, g * hd, seen, hd);
    const auto V = v.block(0, g * hd, seen, hd);
    Mat p = (q.block(0, j * hd, rows, hd) * K.transpose()) * scale;
    for (Eigen::Index r = 0; r < rows; ++r) {
      // Causal: position start + r sees positions 0..start + r.
      const Eigen::Index n = start + r + 1;
      const float top = p.row(r).head(n).maxCoeff();
      float sum = 0;
      for (Eigen::Index c = 0; c < n; ++c) sum += (p(r, c) = std::exp(p(r, c) - top));
      p.row(r).head(n) /= sum;
      p.row(r).tail(seen - n).setZero();
    }
    out.block(0, j * hd, rows, hd).noalias() = p * V;
  }
  return out;
}

Mat attention_probs(const Mat& q, const Mat& k, const AttentionShape& sh) {
  const int s = sh.seq, hd = sh.head_dim, group = sh.heads / sh.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  Mat probs = Mat::Zero(static_cast<Eigen::Index>(sh.batch) * sh.heads * s, s);
  for (int b = 0; b < sh.batch; ++b)
    for (int j = 0; j < sh.heads; ++j) {
      const int g = j / group;
      const auto Q = q.block(b * s, j * hd, s, hd);
      const auto K = k.block(b * s, g * hd, s, hd);
      auto P = probs.block((static_cast<Eigen::Index>(b) * sh.heads + j) * s, 0, s, s);
      const Mat scores = (Q * K.transpose()) * scale;
      for (int r = 0; r < s; ++r) {
        // Causal: token r sees tokens 0..r; the rest keep probability 0.
        const float top = scores.row(r).head(r + 1).maxCoeff();
        float sum = 0;
        for (int c = 0; c <= r; ++c) sum += (P(r, c) = std::exp(scores(r, c) - top));
        P.row(r).head(r + 1) /= sum;
      }
    }
  return probs;
}

Mat attention_forward(const Mat& q, const Mat& k, const Mat& v, const AttentionShape& sh, Mat& probs) {
  const int s = sh.seq, hd = sh.head_dim, group = sh.heads / sh.kv_heads;
  probs = attention_probs(q, k, sh);
  Mat out(q.rows(), q.cols());
  for (int b = 0; b < sh.batch; ++b)
    for (int j = 0; j < sh.heads; ++j) {
      const auto V = v.block(b * s, (j / group) * hd, s, hd);
      const auto P = probs.block((static_cast<Eigen::Index>(b) * sh.heads + j) * s, 0, s, s);
      out.block(b * s, j * hd, s, hd).noalias() = P * V;
    }
  return out;
}

void attention_backward(const Mat& dout, const Mat& q, const Mat& k, const Mat& v, const Mat& probs,
                        const AttentionShape& sh, Mat& dq, Mat& dk, Mat& dv) {
  const int s = sh.seq, hd = sh.head_dim, group = sh.heads / sh.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  dq.setZero(q.rows(), q.cols());
  dk.setZero(k.rows(), k.cols());
  dv.setZero(v.rows(), v.cols());
  for (int b = 0; b < sh.batch; ++b)
    for (int j = 0; j < sh.heads; ++j) {
      const int g = j / group;
      const auto Q = q.block(b * s, j * hd, s, hd);
      const auto K = k.block(b * s, g * hd, s, hd);
      const auto V = v.block(b * s, g * hd, s, hd);
      const auto dO = dout.block(b * s, j * hd, s, hd);
      const auto P = probs.block((static_cast<Eigen::Index>(b) * sh.heads + j) * s, 0, s, s);
      const Mat dP = dO * V.transpose();
      dv.block(b * s, g * hd, s, hd).noalias() += P.transpose() * dO;
      // Softmax backward: dS = P * (dP - rowsum(dP * P)); masked entries have P = 0 and stay 0.
      Mat dS = P.cwiseProduct(dP);
      const Eigen::VectorXf row_dot = dS.rowwise().sum();
      dS -= P.cwiseProduct(row_dot.replicate(1, s));
      dS *= scale;
      dq.block(b * s, j * hd, s, hd).noalias() = dS * K;
      dk.block(b * s, g * hd, s, hd).noalias() += dS.transpose() * Q;
    }
}

double cross_entropy_forward(const Mat& logits, const std::vector<int>& targets, Mat& probs) {
  probs.resize(logits.rows(), logits.cols());
  double total = 0;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    const float top = logits.row(r).maxCoeff();
    probs.row(r) = (logits.row(r).array() - top).exp();
    const double sum = probs.row(r).cast<double>().sum();
    probs.row(r) /= static_cast<float>(sum);
    total += std::log(sum) + top - logits(r, targets[static_cast<size_t>(r)]);
  }
  return total / static_cast<double>(logits.rows());
}

Mat cross_entropy_backward(const Mat& probs, const std::vector<int>& targets, double scale) {
  Mat d = probs;
  for (Eigen::Index r = 0; r < d.rows(); ++r) d(r, targets[static_cast<size_t>(r)]) -= 1.0f;
  d *= static_cast<float>(scale / static_cast<double>(d.rows()));
  return d;
}

}  // namespace pw::ops
