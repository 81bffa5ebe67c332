#pragma once
// The KV cache a served sequence keeps, per token, per attention layer and per tensor-parallel rank, as vLLM
// allocates it (checked against vllm/config/model.py, ModelConfig.get_num_kv_heads and get_head_size, and
// vllm/v1/kv_cache_interface.py, the page sizes of FullAttentionSpec and MLAAttentionSpec):
//   grouped-query or multi-head attention: K and V, 2 x max(1, kv_heads / tp) x head_dim values (a tp larger
//     than the KV heads replicates them, one per rank);
//   multi-head latent attention (DeepSeek-V2, -V3): one latent of kv_lora_rank + qk_rope_head_dim values on
//     every tp rank (vLLM serves MLA as one shared KV head);
// at 2 bytes a value (the model's bf16) or 1 (--kv-cache-dtype fp8). A pipeline stage keeps its own blocks'
// caches only; a sliding-window block keeps at most its window of tokens. MTP modules are not served.
#include "core/model.hpp"
#include "core/stage_costs.hpp"

namespace pw {

enum class KvCacheDtype { Bf16, Fp8 };
int bytes_per_value(KvCacheDtype d);  // 2, 1

// One token in one attention layer on one tp rank. BadInput for a model without a transformer shape.
double kv_bytes_per_token_per_layer(const Model& model, int tp, KvCacheDtype dtype = KvCacheDtype::Bf16);

// A sequence of `tokens` tokens in the blocks of `layers` (Model::layers indices) on one tp rank: every
// block's tokens, capped at its window.
double kv_bytes_for_tokens(const Model& model, const LayerRange& layers, int tp, long tokens,
                           KvCacheDtype dtype = KvCacheDtype::Bf16);

}  // namespace pw
