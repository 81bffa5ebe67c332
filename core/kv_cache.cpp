#include "core/kv_cache.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace pw {

int bytes_per_value(KvCacheDtype d) { return d == KvCacheDtype::Fp8 ? 1 : 2; }

double kv_bytes_per_token_per_layer(const Model& model, int tp, KvCacheDtype dtype) {
  if (!model.transformer)
    throw_bad_input("model '{}' gives explicit per-layer costs, not attention shapes; a KV cache needs a transformer",
                    model.name);
  if (tp < 1) throw_bad_input("--tp: must be at least 1, got {}", tp);
  const TransformerConfig& t = *model.transformer;
  const double value = bytes_per_value(dtype);
  if (t.mla) return static_cast<double>(t.mla->kv_lora_rank + t.mla->qk_rope_head_dim) * value;
  const int heads = std::max(1, t.kv_heads / tp);
  return 2.0 * heads * t.head_dim * value;
}

double kv_bytes_for_tokens(const Model& model, const LayerRange& layers, int tp, long tokens, KvCacheDtype dtype) {
  const double per_token = kv_bytes_per_token_per_layer(model, tp, dtype);
  const TransformerConfig& t = *model.transformer;
  double out = 0;
  for (int i = layers.first; i <= layers.last; ++i) {
    const Layer& l = model.layers[static_cast<size_t>(i)];
    if (l.kind != LayerKind::Block) continue;
    const int window = t.block_window(l.block);
    out += per_token * static_cast<double>(window > 0 ? std::min<long>(tokens, window) : tokens);
  }
  return out;
}

}  // namespace pw
