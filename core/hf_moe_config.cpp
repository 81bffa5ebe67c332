// The mixture-of-experts and latent-attention fields of Hugging Face configs (mixtral, qwen2_moe, qwen3_moe,
// deepseek_v2, deepseek_v3, gpt_oss, llama4_text), each as its transformers configuration_*.py and
// modeling_*.py define them (transformers v4.57 / main, read 2026-12).
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/hf_moe_config.hpp"
#include "core/file_caps.hpp"

namespace pw::detail {
namespace {

int non_negative_int(const JsonFields& f, const std::string& key, int fallback) {
  if (!f.has(key)) return fallback;
  const long v = f.non_negative_integer(key);
  if (v > 1'000'000) f.fail(key, fmt::format("is {}, above 1000000; give a smaller value", v));
  return static_cast<int>(v);
}

// Llama 4's moe_layers when given (else every interleave_moe_layer_step-th block, from step - 1): must be
// a pattern MoeConfig can say.
int llama4_every(const JsonFields& f, int layers) {
  const int step = f.has("interleave_moe_layer_step") ? f.positive_int("interleave_moe_layer_step") : 1;
  if (f.has("moe_layers")) {
    std::vector<bool> moe(static_cast<size_t>(layers), false);
    for (int i : f.indices("moe_layers", layers)) moe[static_cast<size_t>(i)] = true;
    for (int i = 0; i < layers; ++i)
      if (moe[static_cast<size_t>(i)] != ((i + 1) % step == 0))
        f.fail("moe_layers", fmt::format("is not every {}th block (block {} breaks it); describe the model in "
                                         "pipewright's model JSON",
                                         step, i));
  }
  return step;
}

}  // namespace

bool hf_moe_type(const std::string& type) {
  return type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe" || type == "deepseek_v2" ||
         type == "deepseek_v3" || type == "gpt_oss" || type == "llama4_text" || type == "llama4";
}

void read_hf_moe(const JsonFields& f, const std::string& type, TransformerConfig& c) {
  MoeConfig m;
  if (type == "mixtral") {
    // MixtralSparseMoeBlock: num_local_experts experts of intermediate_size, top num_experts_per_tok.
    m.experts = f.positive_int("num_local_experts");
    m.top_k = f.positive_int("num_experts_per_tok");
    m.expert_ffn = c.ffn;
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    // Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer: sparse when not in mlp_only_layers and num_experts > 0 and
    // (layer_idx + 1) % decoder_sparse_step == 0; Qwen2-MoE adds a gated shared expert.
    // transformers v5 writes Qwen3-MoE's count as num_local_experts; the published configs say num_experts.
    m.experts = f.has("num_local_experts") && !f.has("num_experts") ? f.positive_int("num_local_experts")
                                                                     : f.positive_int("num_experts");
    m.top_k = f.positive_int("num_experts_per_tok");
    m.expert_ffn = f.dimension("moe_intermediate_size");
    m.every = f.has("decoder_sparse_step") ? f.positive_int("decoder_sparse_step") : 1;
    if (f.has("mlp_only_layers")) m.dense_blocks = f.indices("mlp_only_layers", c.layers);
    if (type == "qwen2_moe") {
      m.shared_expert_ffn = f.has("shared_expert_intermediate_size") ? f.dimension("shared_expert_intermediate_size", true) : 0;
      m.shared_expert_gate = m.shared_expert_ffn > 0;
    }
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    // DeepseekV3DecoderLayer: MoE when layer_idx >= first_k_dense_replace (and layer_idx % moe_layer_freq
    // == 0 in DeepSeek's own modelling code); n_shared_experts experts of moe_intermediate_size together.
    m.experts = f.positive_int("n_routed_experts");
    m.top_k = f.positive_int("num_experts_per_tok");
    m.expert_ffn = f.dimension("moe_intermediate_size");
    const long shared_ffn = static_cast<long>(non_negative_int(f, "n_shared_experts", 0)) * m.expert_ffn;
    if (shared_ffn > kMaxDimension)
      f.fail("n_shared_experts", fmt::format("x moe_intermediate_size is {}, above the cap of {} for a layer's size; "
                                             "give fewer shared experts", shared_ffn, kMaxDimension));
    m.shared_expert_ffn = static_cast<int>(shared_ffn);
    m.first_dense = non_negative_int(f, "first_k_dense_replace", 0);
    // Group-limited routing (DeepSeek-V2's group_limited_greedy, V3's noaux_tc): top_k experts inside the
    // topk_group best of n_group groups. One group is no limit (DeepSeek-V2-Lite).
    const int groups = non_negative_int(f, "n_group", 0);
    if (groups > 1 && f.has("topk_group")) {
      m.groups = groups;
      m.top_groups = non_negative_int(f, "topk_group", 0);
    }
    if (f.has("routed_scaling_factor")) m.routed_scaling = f.positive_figure("routed_scaling_factor", kFactorRange);
    if (f.has("moe_layer_freq") && f.positive_int("moe_layer_freq") != 1)
      f.fail("moe_layer_freq", "is not 1; only every block from first_k_dense_replace on is modelled as MoE");
    // DeepSeek-V3's noaux_tc routing keeps e_score_correction_bias, one per expert.
    m.router_score_bias = type == "deepseek_v3" || (f.has("topk_method") && f.string("topk_method") == "noaux_tc");
    MlaConfig a;
    a.q_lora_rank = f.has("q_lora_rank") ? f.dimension("q_lora_rank") : 0;  // null: one query projection
    a.kv_lora_rank = f.dimension("kv_lora_rank");
    a.qk_nope_head_dim = f.dimension("qk_nope_head_dim");
    a.qk_rope_head_dim = f.dimension("qk_rope_head_dim");
    a.v_head_dim = f.dimension("v_head_dim");
    c.mla = a;
    c.head_dim = a.qk_head_dim();
    c.kv_heads = c.heads;
    c.mtp_layers = non_negative_int(f, "num_nextn_predict_layers", 0);
  } else if (type == "gpt_oss") {
    // GptOssMLP: num_local_experts experts of intermediate_size with biases, a router with a bias; attention
    // with biases and one sink logit per head.
    m.experts = f.positive_int("num_local_experts");
    m.top_k = f.has("num_experts_per_tok") ? f.positive_int("num_experts_per_tok") : f.positive_int("experts_per_token");
    m.expert_ffn = c.ffn;
    m.expert_bias = true;
    c.attention_sinks = true;
  } else {
    // Llama4TextMoe: num_local_experts experts of intermediate_size, top num_experts_per_tok, and one shared
    // expert of intermediate_size; its dense blocks' MLP is intermediate_size_mlp wide.
    m.experts = f.positive_int("num_local_experts");
    m.top_k = f.positive_int("num_experts_per_tok");
    m.expert_ffn = c.ffn;
    m.shared_expert_ffn = c.ffn;
    m.every = llama4_every(f, c.layers);
    if (f.has("intermediate_size_mlp")) c.ffn = f.dimension("intermediate_size_mlp");
  }
  check_moe(m, c.layers, f.source());
  c.moe = m;
  c.family = type == "llama4" ? "llama4_text" : type;
}

}  // namespace pw::detail
