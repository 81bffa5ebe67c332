#pragma once
// Multi-head latent attention (DeepSeek-V2, -V3): queries and keys/values are projected down to low-rank
// latents and back up per head; each head's query and key have a part without positions (nope) and a
// rotary part (rope) whose key is shared by the heads; values have their own head size.
namespace pw {

struct MlaConfig {
  int q_lora_rank = 0;  // the query latent; 0: queries projected directly from the hidden state (V2-Lite)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;

  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }

  friend bool operator==(const MlaConfig&, const MlaConfig&) = default;
};

}  // namespace pw
