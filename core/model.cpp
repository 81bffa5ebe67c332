#include "core/model.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/json_text.hpp"

namespace pw {

int Model::num_blocks() const {
  int blocks = 0;
  for (const Layer& l : layers) blocks += l.kind == LayerKind::Block ? 1 : 0;
  return blocks > 0 ? blocks : num_layers();
}

int Model::block_index(int i) const {
  if (i < 0 || i >= num_blocks())
    throw_runtime("block {} of model '{}' does not exist ({} blocks)", i, name, num_blocks());
  return block_indices()[static_cast<size_t>(i)];
}

std::vector<int> Model::block_indices() const {
  std::vector<int> out;
  for (int k = 0; k < num_layers(); ++k)
    if (layers[k].kind == LayerKind::Block) out.push_back(k);
  if (out.empty())  // no Block layers: every layer is a block
    for (int k = 0; k < num_layers(); ++k) out.push_back(k);
  return out;
}

Model one_block_per_kind(const Model& model) {
  if (!model.transformer) throw_runtime("one_block_per_kind: model '{}' has no transformer shape", model.name);
  TransformerConfig c = *model.transformer;
  if (c.moe) {
    bool dense = false, moe = false;
    for (int i = 0; i < c.layers; ++i) (c.moe_block(i) ? moe : dense) = true;
    // The dense one first, then the MoE one.
    c.moe->first_dense = dense ? 1 : 0;
    c.moe->every = 1;
    c.moe->dense_blocks.clear();
    c.layers = (dense ? 1 : 0) + (moe ? 1 : 0);
  } else {
    c.layers = 1;
  }
  return make_transformer_model(model.name, c);
}

Model blocks_per_kind_copies(const Model& model, int copies) {
  const Model one = one_block_per_kind(model);
  TransformerConfig c = *one.transformer;
  const int kinds = c.layers;
  c.layers = kinds * copies;
  if (c.moe && kinds == 2)
    for (int i = 0; i < c.layers; i += 2) c.moe->dense_blocks.push_back(i);
  if (c.moe) c.moe->first_dense = 0;
  return make_transformer_model(model.name, c);
}

bool Model::has_explicit_costs() const {
  for (const Layer& l : layers)
    if (l.kind == LayerKind::Explicit) return true;
  return false;
}

bool gated(MlpKind k) { return k == MlpKind::SwiGlu || k == MlpKind::GeGlu; }

int TransformerConfig::block_window(int i) const {
  if (attention_window <= 0) return 0;
  return i >= 0 && full_attention_every > 0 && (i + 1) % full_attention_every == 0 ? 0 : attention_window;
}

Model make_transformer_model(const std::string& name, const TransformerConfig& config) {
  Model m;
  m.name = name;
  m.transformer = config;
  m.layers.push_back({"embedding", LayerKind::Embedding, std::nullopt});
  for (int i = 0; i < config.layers; ++i)
    m.layers.push_back({"block" + std::to_string(i), LayerKind::Block, std::nullopt, i});
  for (int i = 0; i < config.mtp_layers; ++i)
    m.layers.push_back({"mtp" + std::to_string(i), LayerKind::Mtp, std::nullopt, config.layers + i});
  m.layers.push_back({"head", LayerKind::Head, std::nullopt});
  return m;
}

const char* to_string(MlpKind k) {
  switch (k) {
    case MlpKind::Gelu: return "gelu";
    case MlpKind::SwiGlu: return "swiglu";
    case MlpKind::ReluSquared: return "relu2";
    case MlpKind::GeGlu: return "geglu";
  }
  return "?";
}

namespace {

double attention_parameters(const TransformerConfig& c, double t) {
  const double h = c.hidden;
  double p = 0;
  if (c.mla) {
    const MlaConfig& m = *c.mla;
    const double n = c.heads;
    // Megatron-Core's MLA: the down projections and their norms whole on every tp rank, the up and
    // output projections split by heads.
    const double q = m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * n * m.qk_head_dim() / t
                                       : h * n * m.qk_head_dim() / t;
    p = q + h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
        static_cast<double>(m.kv_lora_rank) * n * (m.qk_nope_head_dim + m.v_head_dim) / t + n * m.v_head_dim * h / t;
  } else {
    const double q = static_cast<double>(c.heads) * c.head_dim;
    const double kv = static_cast<double>(c.kv_heads) * c.head_dim;
    p = (h * q + 2 * h * kv + q * h) / t;
    if (c.bias || c.qkv_bias) p += (q + 2 * kv) / t;
    if (c.bias) p += h;  // the output projection's bias, row parallel: whole
  }
  if (c.qk_norm) p += 2.0 * c.head_dim;  // one weight per head dimension, shared by the heads
  if (c.attention_sinks) p += c.heads / t;
  return p;
}

// A dense MLP of width f: up (gate and up when gated) and down; with biases, the up ones sharded and the
// down one (row parallel, added after the reduction) whole.
double mlp_parameters(const TransformerConfig& c, double f, double t) {
  const double h = c.hidden;
  const double mlp_in = gated(c.mlp) ? 2 * f : f;
  return (mlp_in * h + f * h) / t + (c.bias ? mlp_in / t + h : 0);
}

}  // namespace

LayerParameters layer_parameters(const TransformerConfig& c, LayerKind kind, int block, int tp, int ep, int etp) {
  const double t = tp > 1 ? tp : 1;
  const double h = c.hidden;
  const double V = static_cast<double>(c.vocab);
  const double norm = c.norm == NormKind::LayerNorm ? 2 * h : h;  // LayerNorm: weight and bias
  LayerParameters p;
  switch (kind) {
    case LayerKind::Embedding:
      p.dense = V * h / t + (c.learned_positions ? static_cast<double>(c.max_seq_len) * h : 0);
      break;
    case LayerKind::Head:
      p.dense = norm + V * h / t;
      break;
    case LayerKind::Block:
    case LayerKind::Mtp: {
      p.dense = attention_parameters(c, t) + (c.post_norms ? 4 : 2) * norm;
      if (c.moe_block(block)) {
        const MoeConfig& m = *c.moe;
        p.dense += m.router_parameters(c.hidden) + m.shared_parameters(c.hidden, gated(c.mlp)) / t;
        p.routed = m.routed_parameters(c.hidden, gated(c.mlp)) / (std::max(ep, 1) * std::max(etp, 1));
      } else {
        p.dense += mlp_parameters(c, c.ffn, t);
      }
      // DeepSeek-V3's MTP module: norms of the hidden state and of the embedding, their 2h -> h projection,
      // the block, a final norm, and its own copy of the embedding (the LM head it shares with the head).
      if (kind == LayerKind::Mtp) p.dense += 2 * norm + 2 * h * h / t + norm + V * h / t;
      break;
    }
    case LayerKind::Explicit: break;
  }
  return p;
}

namespace {

double counted_parameters(const Model& model, bool active) {
  double total = 0;
  for (const Layer& l : model.layers) {
    if (l.kind == LayerKind::Explicit) {
      total += l.explicit_costs ? l.explicit_costs->parameter_bytes / 2 : 0;  // bf16 weights
    } else if (model.transformer && l.kind != LayerKind::Mtp) {
      const TransformerConfig& c = *model.transformer;
      const LayerParameters p = layer_parameters(c, l.kind, l.block, 1);
      total += p.dense + (active && p.routed > 0 ? p.routed * c.moe->top_k / c.moe->experts : p.routed);
    }
  }
  const bool has_head = model.transformer && !model.layers.empty() && model.layers.back().kind == LayerKind::Head;
  if (has_head && model.transformer->tied_embeddings)
    total -= static_cast<double>(model.transformer->vocab) * model.transformer->hidden;  // one shared matrix
  return total;
}

}  // namespace

double parameter_count(const Model& model) { return counted_parameters(model, false); }
double active_parameter_count(const Model& model) { return counted_parameters(model, true); }

namespace detail {
std::string model_name_from_source(const std::string& source) {
  std::filesystem::path p(source);
  std::string stem = p.filename().string();
  for (const char* suffix : {".json", ".config"})
    if (stem.size() > std::string(suffix).size() && stem.ends_with(suffix))
      stem.resize(stem.size() - std::string(suffix).size());
  // A Hugging Face snapshot folder holds "config.json": the folder names the model.
  if (stem == "config" && p.has_parent_path() && !p.parent_path().filename().empty())
    return p.parent_path().filename().string();
  return stem;
}
}  // namespace detail

Model model_from_json_text(const std::string& text, const std::string& source) {
  const nlohmann::json j = parse_json_text(text, source);
  if (!j.is_object()) throw_bad_input("{}: expected a JSON object describing a model, got {}", source, j.type_name());
  if (j.contains("model_type")) return detail::model_from_hf_config(j, source);
  if (j.contains("layers") || j.contains("transformer")) return detail::model_from_pipewright_json(j, source);
  throw_bad_input(
      "{}: not a model: expected a Hugging Face config.json (with \"model_type\") or a pipewright model JSON "
      "(with \"layers\" or \"transformer\")",
      source);
}

Model load_model(const std::string& name_or_path) {
  std::error_code ec;
  const std::filesystem::path snapshot_config = std::filesystem::path(name_or_path) / "config.json";
  if (std::filesystem::is_directory(name_or_path, ec) && std::filesystem::is_regular_file(snapshot_config, ec))
    return model_from_json_text(read_text_file(snapshot_config.string(), "model", kMaxModelFileBytes), snapshot_config.string());
  if (names_a_file(name_or_path)) return model_from_json_text(read_text_file(name_or_path, "model", kMaxModelFileBytes), name_or_path);
  return model_preset(name_or_path);
}

}  // namespace pw
