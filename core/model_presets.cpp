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
