#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "core/model.hpp"

namespace pw {
namespace {

// GPT-3 as Megatron trains it (Brown et al. 2020, table 2.1; Narayanan et al. 2021): FFN 4h, the
// 50257-token GPT-2 vocabulary padded to 51200, 2048-token sequences, pre-LayerNorm, GeLU, learned
// positions, biases and dropout. The LM head shares the embedding matrix (Megatron's default), so
// parameter_count follows P = 12 L h^2 (1 + 13/(12h) + (V+s)/(12 L h)) plus the final LayerNorm.
TransformerConfig gpt3(int hidden, int layers, int heads) {
  TransformerConfig c;
  c.family = "gpt";
  c.hidden = hidden;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = heads;
  c.head_dim = hidden / heads;
  c.ffn = 4 * hidden;
  c.vocab = 51200;
  c.max_seq_len = 2048;
  c.mlp = MlpKind::Gelu;
  c.norm = NormKind::LayerNorm;
  c.tied_embeddings = true;
  c.learned_positions = true;
  c.bias = true;
  c.dropout = true;
  return c;
}

// Llama 2 and 3 (Touvron et al. 2023; Meta's config.json files): RMSNorm, SwiGLU, rotary positions,
// no biases, no dropout, untied LM head.
TransformerConfig llama(int hidden, int ffn, int layers, int heads, int kv_heads, long vocab, int seq_len) {
  TransformerConfig c;
  c.family = "llama";
  c.hidden = hidden;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.ffn = ffn;
  c.vocab = vocab;
  c.max_seq_len = seq_len;
  c.mlp = MlpKind::SwiGlu;
  c.norm = NormKind::RmsNorm;
  return c;
}

// Mixtures of experts, from their config.json files on the Hugging Face Hub (the shapes core/hf_moe_config.cpp
// reads): the Llama-style block with `experts` routed experts of `expert_ffn`, top `top_k`.
TransformerConfig moe(TransformerConfig c, int experts, int top_k, int expert_ffn) {
  c.moe = MoeConfig{};
  c.moe->experts = experts;
  c.moe->top_k = top_k;
  c.moe->expert_ffn = expert_ffn;
  return c;
}

TransformerConfig with_head_dim(TransformerConfig c, int head_dim) {
  c.head_dim = head_dim;
  return c;
}

// Qwen3-MoE (Qwen/Qwen3-30B-A3B, Qwen3-235B-A22B): head_dim 128, query-key norms, no shared expert. Trained
// at 4096 tokens in its first pretraining stage (Qwen3 technical report, section 3.2).
TransformerConfig qwen3_moe(int hidden, int layers, int heads, int ffn, int expert_ffn) {
  TransformerConfig c = moe(with_head_dim(llama(hidden, ffn, layers, heads, 4, 151936, 4096), 128), 128, 8, expert_ffn);
  c.family = "qwen3_moe";
  c.qk_norm = true;
  return c;
}

// DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json; DeepSeek-AI 2024): multi-head latent attention, 3 dense
// blocks then 58 MoE blocks of 256 routed experts (top 8 inside the best 4 of 8 groups) and one shared
// expert, one MTP module, 4096-token pretraining sequences.
TransformerConfig deepseek_v3() {
  TransformerConfig c = moe(llama(7168, 18432, 61, 128, 128, 129280, 4096), 256, 8, 2048);
  c.family = "deepseek_v3";
  c.moe->shared_expert_ffn = 2048;
  c.moe->first_dense = 3;
  c.moe->router_score_bias = true;
  c.moe->groups = 8;
  c.moe->top_groups = 4;
  c.moe->routed_scaling = 2.5;
  c.mla = MlaConfig{1536, 512, 128, 64, 128};
  c.head_dim = c.mla->qk_head_dim();
  c.mtp_layers = 1;
  return c;
}

// gpt-oss-120b (openai/gpt-oss-120b config.json): 128 experts of 2880 with biases, top 4; head_dim 64;
// alternating 128-token sliding-window and full-attention layers; attention biases and sinks; 4096-token
// pretraining context (its rope_scaling's original_max_position_embeddings).
TransformerConfig gpt_oss_120b() {
  TransformerConfig c = moe(with_head_dim(llama(2880, 2880, 36, 64, 8, 201088, 4096), 64), 128, 4, 2880);
  c.family = "gpt_oss";
  c.moe->expert_bias = true;
  c.bias = true;
  c.qkv_bias = true;
  c.attention_sinks = true;
  c.attention_window = 128;
  c.full_attention_every = 2;
  return c;
}

TransformerConfig mixtral(int hidden, int ffn, int layers, int heads, long vocab) {
  TransformerConfig c = moe(llama(hidden, ffn, layers, heads, 8, vocab, 4096), 8, 2, ffn);
  c.family = "mixtral";
  return c;
}

const std::map<std::string, TransformerConfig>& presets() {
  static const std::map<std::string, TransformerConfig> table = {
      {"gpt3-1.3b", gpt3(2048, 24, 16)},
      {"gpt3-2.7b", gpt3(2560, 32, 32)},
      {"gpt3-6.7b", gpt3(4096, 32, 32)},
      {"gpt3-13b", gpt3(5120, 40, 40)},
      {"gpt3-175b", gpt3(12288, 96, 96)},
      {"llama2-7b", llama(4096, 11008, 32, 32, 32, 32000, 4096)},
      {"llama2-13b", llama(5120, 13824, 40, 40, 40, 32000, 4096)},
      {"llama2-70b", llama(8192, 28672, 80, 64, 8, 32000, 4096)},
      {"llama3-8b", llama(4096, 14336, 32, 32, 8, 128256, 8192)},
      {"llama3-70b", llama(8192, 28672, 80, 64, 8, 128256, 8192)},
      {"llama3-405b", llama(16384, 53248, 126, 128, 8, 128256, 8192)},
      // Mistral's config.json files: Mixtral 8x7B (32000-token vocabulary) and 8x22B (32768).
      {"mixtral-8x7b", mixtral(4096, 14336, 32, 32, 32000)},
      {"mixtral-8x22b", mixtral(6144, 16384, 56, 48, 32768)},
      {"deepseek-v3", deepseek_v3()},
      {"qwen3-30b-a3b", qwen3_moe(2048, 48, 32, 6144, 768)},
      {"qwen3-235b-a22b", qwen3_moe(4096, 94, 64, 12288, 1536)},
      {"gpt-oss-120b", gpt_oss_120b()},
  };
  return table;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, config] : presets()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

Model model_preset(const std::string& name) {
  const auto it = presets().find(name);
  if (it == presets().end()) {
    std::string known;
    for (const std::string& n : model_preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw_bad_input("unknown model '{}'; known models: {} (or give a path to a config.json or pipewright model JSON)",
                    name, known);
  }
  return make_transformer_model(name, it->second);
}

}  // namespace pw
