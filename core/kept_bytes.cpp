#include "core/kept_bytes.hpp"

namespace pw {
namespace {

constexpr double kStat = 4;  // an fp32 per-row statistic (1/rms, log-sum-exp)
constexpr double kId = 4;    // int32 token id

}  // namespace

KeptBytes kept_bytes(const TransformerConfig& c, LayerKind kind, int micro_batch_size, int seq_len, Recompute recompute,
                     const KeptLayout& layout) {
  const double b = micro_batch_size, s = seq_len, e = layout.element;
  const double n = b * s, h = c.hidden, V = static_cast<double>(c.vocab);
  KeptBytes k;
  switch (kind) {
    case LayerKind::Embedding:
      k.after_forward = kId * n;
      k.after_backward = e * n * h + kId * n;
      k.output = e * n * h;
      break;
    case LayerKind::Head:
      k.after_forward = e * (2 * n * h + n * V) + kStat * n + kId * n + (layout.head_keeps_lse ? kStat * n : 0);
      k.after_backward = e * (3 * n * h + n * V);
      break;
    case LayerKind::Block: {
      const double q = static_cast<double>(c.heads) * c.head_dim;
      const double kv = layout.kv_per_query_head ? q : static_cast<double>(c.kv_heads) * c.head_dim;
      const double f = c.ffn, u = gated(c.mlp) ? 2 * f : f;
      const double softmax = b * c.heads * s * s;
      const double slots = e * (4 * n * h + n * (2 * q + 2 * kv + u + f)) + kStat * 2 * n;
      k.after_forward = recompute == Recompute::Full        ? e * n * h
                        : recompute == Recompute::Selective ? slots
                                                            : slots + e * softmax;
      k.after_backward = e * n * (f + u + 2 * q + 2 * kv + 8 * h);
      k.output = e * n * h;
      break;
    }
    case LayerKind::Mtp:  // refused by layer_work: the backends compute no MTP module
    case LayerKind::Explicit: break;
  }
  return k;
}

}  // namespace pw
