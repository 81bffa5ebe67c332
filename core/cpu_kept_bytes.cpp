#include "core/cpu_kept_bytes.hpp"

namespace pw {
namespace {

constexpr double kFloat = 4;  // float32 element
constexpr double kId = 4;     // int32 token id

}  // namespace

CpuKeptBytes cpu_kept_bytes(const TransformerConfig& c, LayerKind kind, int micro_batch_size, int seq_len,
                            Recompute recompute) {
  const double b = micro_batch_size, s = seq_len;
  const double n = b * s, h = c.hidden, V = static_cast<double>(c.vocab);
  CpuKeptBytes k;
  switch (kind) {
    case LayerKind::Embedding:
      k.after_forward = kId * n;
      k.after_backward = kFloat * n * h + kId * n;
      k.output = kFloat * n * h;
      break;
    case LayerKind::Head:
      k.after_forward = kFloat * (2 * n * h + n + n * V) + kId * n;
      k.after_backward = kFloat * (3 * n * h + n * V);
      break;
    case LayerKind::Block: {
      const double q = static_cast<double>(c.heads) * c.head_dim, kv = static_cast<double>(c.kv_heads) * c.head_dim;
      const double f = c.ffn, u = c.mlp == MlpKind::SwiGlu ? 2 * f : f;
      const double softmax = b * c.heads * s * s;
      const double slots = 4 * n * h + 2 * n + n * (2 * q + 2 * kv + u + f);
      k.after_forward = kFloat * (recompute == Recompute::Full        ? n * h
                                  : recompute == Recompute::Selective ? slots
                                                                      : slots + softmax);
      k.after_backward = kFloat * n * (f + u + 2 * q + 2 * kv + 8 * h);
      k.output = kFloat * n * h;
      break;
    }
    case LayerKind::Explicit: break;
  }
  return k;
}

}  // namespace pw
