// Hugging Face config.json (llama, mistral, qwen2, qwen3, phi3, nemotron, gemma2, gemma3, gpt2, gpt_neox, and the
// mixtures of experts mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss, llama4) to a transformer model. Each type's fields as its transformers configuration_*.py defines them; a
// multimodal config (Gemma 3's) gives its language model in text_config.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.hpp"
#include "core/excerpt.hpp"
#include "core/hf_moe_config.hpp"
#include "core/json_text.hpp"
#include "core/model.hpp"

namespace pw {
namespace {

// Llama-style keys and the names other model types use for them (GPT-2's attribute_map, plus its
// n_inner for the MLP width). The first key present and not null wins.
const std::map<std::string, std::vector<std::string>>& aliases() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"hidden_size", {"n_embd"}},
      {"num_hidden_layers", {"n_layer"}},
      {"num_attention_heads", {"n_head"}},
      {"max_position_embeddings", {"n_positions"}},
      {"intermediate_size", {"n_inner"}},
  };
  return table;
}

// The key under which `canonical` is given, or "" when neither it nor an alias is.
std::string present_key(const JsonFields& f, const std::string& canonical) {
  if (f.has(canonical)) return canonical;
  const auto it = aliases().find(canonical);
  if (it != aliases().end())
    for (const std::string& alias : it->second)
      if (f.has(alias)) return alias;
  return "";
}

// The value under `canonical` or an alias; BadInput naming every accepted key when none is given.
std::string required_key(const JsonFields& f, const std::string& canonical) {
  const std::string key = present_key(f, canonical);
  if (key.empty()) {
    std::string names = "'" + canonical + "'";
    const auto it = aliases().find(canonical);
    if (it != aliases().end())
      for (const std::string& alias : it->second) names += " (or '" + alias + "')";
    throw_bad_input("{}: missing required field {}", f.source(), names);
  }
  return key;
}

int required_int(const JsonFields& f, const std::string& canonical) { return f.positive_int(required_key(f, canonical)); }

int required_dimension(const JsonFields& f, const std::string& canonical) {
  return f.dimension(required_key(f, canonical));
}

bool any_dropout(const JsonFields& f, std::initializer_list<const char*> keys, double fallback) {
  for (const char* key : keys)
    if (f.non_negative_number(key, fallback) > 0) return true;
  return false;
}

// The pretraining length where the config states it: original_max_position_embeddings at the top
// (Phi-3), in rope_scaling (Llama 3.1) or in transformers v5's rope_parameters, itself or per layer type
// (Gemma 3). Else max_position_embeddings up to kDefaultSeqLenCap: that field gives the context window a
// model was extended to (Qwen2.5-72B: 131072), never what a pretraining run uses. A learned position
// table (GPT-2) is its length whole.
int default_seq_len(const JsonFields& f, bool learned_positions) {
  const int window = required_int(f, "max_position_embeddings");
  if (learned_positions) return window;
  constexpr const char* kOriginal = "original_max_position_embeddings";
  if (f.has(kOriginal)) return f.positive_int(kOriginal);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!f.has(key) || !f.required(key).is_object()) continue;
    const JsonFields rope = f.object(key);
    if (rope.has(kOriginal)) return rope.positive_int(kOriginal);
    for (const auto& [layer_type, params] : f.required(key).items())
      if (params.is_object() && params.contains(kOriginal))
        return rope.object(layer_type).positive_int(kOriginal);
  }
  return std::min(window, kDefaultSeqLenCap);
}

// Gemma's pattern of sliding and global layers (configuration_gemma2.py, configuration_gemma3.py): from
// layer_types when given, else every second layer global (Gemma 2) or every sliding_window_pattern-th
// (Gemma 3, 6 by default). 0 when layer_types names no full-attention layer.
int gemma_full_attention_every(const JsonFields& f, const std::string& type, int layers) {
  if (f.has("layer_types") && f.required("layer_types").is_array()) {
    const nlohmann::json& types = f.required("layer_types");
    if (static_cast<int>(types.size()) != layers)
      f.fail("layer_types", fmt::format("lists {} layers but num_hidden_layers is {}", types.size(), layers));
    int first_full = 0;
    while (first_full < layers && types[static_cast<size_t>(first_full)] != "full_attention") ++first_full;
    const int every = first_full < layers ? first_full + 1 : 0;
    for (int i = 0; i < layers; ++i) {
      const nlohmann::json& t = types[static_cast<size_t>(i)];
      if (t != "full_attention" && t != "sliding_attention")
        f.fail("layer_types", fmt::format("layer {} is {}; give full_attention or sliding_attention", i, json_excerpt(t)));
      if ((t == "full_attention") != (every > 0 && (i + 1) % every == 0))
        f.fail("layer_types", fmt::format("is not a repeating pattern of sliding layers and one full-attention layer "
                                          "(layer {} breaks it); describe the model in pipewright's model JSON",
                                          i));
    }
    return every;
  }
  if (type == "gemma2" || type == "gpt_oss") return 2;
  return f.has("sliding_window_pattern") ? f.positive_int("sliding_window_pattern") : 6;
}

}  // namespace

namespace detail {
Model model_from_hf_config(const nlohmann::json& outer, const std::string& source) {
  // A multimodal config keeps the language model's fields in text_config (Gemma 3, transformers v5's
  // composite configs); its name stays the outer one.
  const bool nested = outer.is_object() && outer.contains("text_config") && outer["text_config"].is_object();
  const nlohmann::json& j = nested ? outer["text_config"] : outer;
  const JsonFields f(j, nested ? source + ": text_config" : source);
  // The language model's own type; a text_config without one is the outer type's.
  const std::string type = nested && !f.has("model_type") ? JsonFields(outer, source).string("model_type") : f.string("model_type");
  // Gemma 3's language model (Gemma3TextConfig) and Gemma 2: gated GELU MLP, explicit head_dim, sliding
  // and global layers, tied embeddings.
  const bool gemma = type == "gemma2" || type == "gemma3_text" || type == "gemma3";
  const bool gpt2 = type == "gpt2";
  const bool neox = type == "gpt_neox";
  // Nemotron (configuration_nemotron.py): rotary, GQA, LayerNorm1p (weight and bias), a squared-ReLU MLP
  // of up and down projections, no gate.
  const bool nemotron = type == "nemotron";
  const bool moe = hf_moe_type(type);
  const bool gpt_oss = type == "gpt_oss";
  const bool llama4 = type == "llama4_text" || type == "llama4";
  const bool llama_like = type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
                          type == "phi3" || nemotron || gemma || moe;
  if (!gpt2 && !neox && !llama_like)
    throw_bad_input("{}: model_type '{}' is not supported; use a config.json of gpt2, gpt_neox, llama, mistral, "
                    "qwen2, qwen3, phi3, nemotron, gemma2, gemma3, mixtral, qwen2_moe, qwen3_moe, deepseek_v2, "
                    "deepseek_v3, gpt_oss or llama4, or a pipewright model JSON",
                    source, excerpt(type));

  TransformerConfig c;
  c.family = nemotron ? "nemotron" : gemma ? "gemma" : llama_like ? "llama" : "gpt";
  c.hidden = required_dimension(f, "hidden_size");
  c.layers = required_int(f, "num_hidden_layers");
  if (c.layers > kMaxLayers)
    f.fail(present_key(f, "num_hidden_layers"),
           fmt::format("is {} layers, above the cap of {}; give at most {}", c.layers, kMaxLayers, kMaxLayers));
  c.heads = required_dimension(f, "num_attention_heads");
  c.kv_heads = llama_like && f.has("num_key_value_heads") ? f.dimension("num_key_value_heads") : c.heads;
  if (llama_like && f.has("head_dim")) {
    c.head_dim = f.dimension("head_dim");
  } else {
    if (c.hidden % c.heads != 0)
      throw_bad_input("{}: hidden size {} is not a multiple of {} attention heads; give head_dim", source, c.hidden,
                      c.heads);
    c.head_dim = c.hidden / c.heads;
  }
  if (c.heads % c.kv_heads != 0)
    throw_bad_input("{}: num_key_value_heads ({}) must divide num_attention_heads ({})", source, c.kv_heads, c.heads);
  // GPT-2's n_inner may be null: 4 x hidden.
  c.ffn = gpt2 && present_key(f, "intermediate_size").empty() ? 4 * c.hidden : required_dimension(f, "intermediate_size");
  c.vocab = f.count("vocab_size", kMaxVocab, "tokens");
  c.max_seq_len = default_seq_len(f, gpt2);
  c.mlp = nemotron ? MlpKind::ReluSquared : gemma ? MlpKind::GeGlu : llama_like ? MlpKind::SwiGlu : MlpKind::Gelu;
  c.norm = llama_like && !nemotron ? NormKind::RmsNorm : NormKind::LayerNorm;
  if (nemotron && f.has("hidden_act") && f.string("hidden_act") != "relu2")
    f.fail("hidden_act", fmt::format("is \"{}\"; Nemotron's MLP is modelled with relu2 only", excerpt(f.string("hidden_act"))));
  // Qwen3Attention's and Gemma3Attention's q_norm and k_norm
  c.qk_norm = type == "qwen3" || type == "qwen3_moe" || type == "gemma3_text" || type == "gemma3";
  // Gemma2DecoderLayer and Gemma3DecoderLayer: post_attention_layernorm and post_feedforward_layernorm
  // besides the input and pre-feedforward ones.
  c.post_norms = gemma;
  // One sliding window in every layer (Mistral, Phi-3: sliding_window; null or absent: full attention).
  // Qwen2/3 window only the layers from max_window_layers on when use_sliding_window is set: not modelled.
  if ((type == "qwen2" || type == "qwen3" || type == "qwen2_moe" || type == "qwen3_moe") &&
      f.boolean("use_sliding_window", false))
    f.fail("use_sliding_window", "is true; sliding windows on some layers only (max_window_layers) are not modelled; "
                                 "set it false or describe the model in pipewright's model JSON");
  if ((type == "mistral" || type == "phi3" || type == "mixtral" || gemma || gpt_oss) && f.has("sliding_window") &&
      !f.required("sliding_window").is_null())
    c.attention_window = f.positive_int("sliding_window");
  if ((gemma || gpt_oss) && c.attention_window > 0) c.full_attention_every = gemma_full_attention_every(f, type, c.layers);
  // Llama 4's chunked attention (attention_chunk_size keys) on its rotary layers, every
  // no_rope_layer_interval-th layer (NoPE) attending to all: as a window of that many keys.
  if (llama4 && f.has("attention_chunk_size")) {
    c.attention_window = f.positive_int("attention_chunk_size");
    c.full_attention_every = f.has("no_rope_layer_interval") ? f.positive_int("no_rope_layer_interval") : 4;
  }
  // GPT-2 and Gemma inherit the base default: tied.
  c.tied_embeddings = f.boolean("tie_word_embeddings", gpt2 || gemma);
  c.learned_positions = gpt2;                                  // GPT-NeoX and the Llama family use rotary
  if (gpt2) {
    c.bias = true;
    c.dropout = any_dropout(f, {"resid_pdrop", "embd_pdrop", "attn_pdrop"}, 0.1);
  } else if (neox) {
    c.bias = f.boolean("attention_bias", true);
    c.dropout = any_dropout(f, {"attention_dropout", "hidden_dropout"}, 0.0);
  } else {
    // Llama's attention_bias puts biases on q, k, v and o; mlp_bias on the MLP. One flag covers
    // all linear layers, so both must be set for it; attention_bias alone counts the QKV biases.
    const bool attention_bias = f.boolean("attention_bias", gpt_oss);
    // gpt-oss: biases on q, k, v and o (its experts' own are MoeConfig::expert_bias).
    c.bias = attention_bias && (gpt_oss || f.boolean("mlp_bias", false));
    c.qkv_bias = type == "qwen2" || type == "qwen2_moe" || attention_bias;  // Qwen2 always has q, k, v biases
    c.dropout = any_dropout(f, {"attention_dropout"}, 0.0);
  }
  if (moe) read_hf_moe(f, type, c);
  const JsonFields top(outer, source);
  const std::string name = top.has("_name_or_path") && top.required("_name_or_path").is_string() &&
                                   !top.string("_name_or_path").empty()
                               ? top.string("_name_or_path")
                               : model_name_from_source(source);
  return make_transformer_model(name, c);
}
}  // namespace detail

}  // namespace pw
