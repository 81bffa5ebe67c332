#include "core/kept_bytes.hpp"

namespace pw {
namespace {

constexpr double kStat = 4;  // an fp32 per-row statistic (1/rms, log-sum-exp)
constexpr double kId = 4;    // int32 token id

}  // namespace

KeptBytes kept_bytes(const TransformerConfig& c, LayerKind kind, int block, int micro_batch_size, int seq_len,
                     Recompute recompute, const KeptLayout& layout, int ep) {
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
      const double attention = e * (4 * n * h + n * (2 * q + 2 * kv)) + kStat * 2 * n;
      double mlp_forward = e * n * (u + f), mlp_backward = e * n * (f + u + 2 * h);
      if (c.moe_block(block)) {
        const MoeConfig& m = *c.moe;
        const double k_ = m.top_k, rows = n * k_, fe = m.expert_ffn, ue = gated(c.mlp) ? 2 * fe : fe;
        const double fs = m.shared_expert_ffn, us = gated(c.mlp) ? 2 * fs : fs;
        const double gate = m.shared_expert_gate ? 1 : 0;
        mlp_forward = e * (2 * n * k_ + rows * h + rows + ep + rows * (h + ue + fe) + n * (us + fs) + gate * (n * h + n));
        mlp_backward = e * (n * (h + m.experts) + rows * (2 * h + ue + fe) + (fs > 0 ? n * (2 * h + us + fs) : 0) +
                            gate * n * (h + 1));
      }
      const double slots = attention + mlp_forward;
      k.after_forward = recompute == Recompute::Full        ? e * n * h
                        : recompute == Recompute::Selective ? slots
                                                            : slots + e * softmax;
      k.after_backward = e * n * (2 * q + 2 * kv + 6 * h) + mlp_backward;
      k.output = e * n * h;
      break;
    }
    case LayerKind::Mtp:  // refused by layer_work: the backends compute no MTP module
    case LayerKind::Explicit: break;
  }
  return k;
}

}  // namespace pw
