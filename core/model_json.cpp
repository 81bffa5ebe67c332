// pipewright's own model JSON: a transformer shape, or a list of layers with explicit costs.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/excerpt.hpp"
#include "core/file_caps.hpp"
#include "core/json_text.hpp"
#include "core/model.hpp"

namespace pw {
namespace {

const char* to_text(NormKind k) { return k == NormKind::RmsNorm ? "rmsnorm" : "layernorm"; }

int optional_count(const JsonFields& f, const char* key, int fallback) {
  return f.has(key) ? f.count(key, kMaxLayers, key) : fallback;
}

MoeConfig read_moe(const JsonFields& f, int layers) {
  f.reject_unknown({"experts", "top_k", "expert_ffn", "shared_expert_ffn", "shared_expert_gate", "expert_bias",
                    "router_score_bias", "first_dense", "every", "dense_blocks", "groups", "top_groups", "routed_scaling"});
  MoeConfig m;
  m.experts = f.count("experts", 1'000'000, "experts");
  m.top_k = f.count("top_k", 1'000'000, "experts");
  if (m.top_k > m.experts)
    f.fail("top_k", fmt::format("is {}, above the {} experts; give a top_k <= {}", m.top_k, m.experts, m.experts));
  m.expert_ffn = f.dimension("expert_ffn");
  m.shared_expert_ffn = f.has("shared_expert_ffn") ? f.dimension("shared_expert_ffn", true) : 0;
  m.shared_expert_gate = f.boolean("shared_expert_gate", false);
  m.expert_bias = f.boolean("expert_bias", false);
  m.router_score_bias = f.boolean("router_score_bias", false);
  m.first_dense = f.has("first_dense") ? static_cast<int>(std::min<long>(f.non_negative_integer("first_dense"), kMaxLayers)) : 0;
  m.every = optional_count(f, "every", 1);
  if (f.has("dense_blocks")) m.dense_blocks = f.indices("dense_blocks", layers);
  m.groups = f.has("groups") ? f.count("groups", 1'000'000, "groups") : 0;
  m.top_groups = f.has("top_groups") ? f.count("top_groups", 1'000'000, "groups") : 0;
  if (f.has("routed_scaling")) m.routed_scaling = f.positive_figure("routed_scaling", kFactorRange);
  std::string where = f.name("");
  if (where.ends_with('.')) where.pop_back();
  check_moe(m, layers, f.source() + ": " + where);
  return m;
}

MlaConfig read_mla(const JsonFields& f) {
  f.reject_unknown({"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
  MlaConfig a;
  a.q_lora_rank = f.has("q_lora_rank") ? f.dimension("q_lora_rank", true) : 0;
  a.kv_lora_rank = f.dimension("kv_lora_rank");
  a.qk_nope_head_dim = f.dimension("qk_nope_head_dim");
  a.qk_rope_head_dim = f.dimension("qk_rope_head_dim");
  a.v_head_dim = f.dimension("v_head_dim");
  return a;
}

TransformerConfig read_transformer(const JsonFields& t) {
  t.reject_unknown({"family", "hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab", "seq_len", "mlp",
                    "norm", "tied_embeddings", "learned_positions", "bias", "qkv_bias", "dropout", "qk_norm", "post_norms",
                    "attention_window", "full_attention_every", "attention_sinks", "moe", "mla", "mtp_layers"});
  TransformerConfig c;
  c.family = t.optional_string("family").value_or("");
  c.hidden = t.dimension("hidden");
  c.layers = t.count("layers", kMaxLayers, "layers");
  c.heads = t.dimension("heads");
  c.kv_heads = t.has("kv_heads") ? t.dimension("kv_heads") : c.heads;
  if (t.has("head_dim")) {
    c.head_dim = t.dimension("head_dim");
  } else {
    if (c.hidden % c.heads != 0)
      throw_bad_input("{}: {} ({}) is not a multiple of {} ({}); give {}", t.source(), t.name("hidden"), c.hidden,
                      t.name("heads"), c.heads, t.name("head_dim"));
    c.head_dim = c.hidden / c.heads;
  }
  c.ffn = t.dimension("ffn");
  c.vocab = t.count("vocab", kMaxVocab, "tokens");
  c.max_seq_len = t.positive_int("seq_len");
  const std::string mlp = t.optional_string("mlp").value_or("gelu");
  if (mlp != "gelu" && mlp != "swiglu" && mlp != "relu2" && mlp != "geglu")
    t.fail("mlp", fmt::format("must be \"gelu\", \"swiglu\", \"geglu\" or \"relu2\", got \"{}\"", excerpt(mlp)));
  c.mlp = mlp == "swiglu" ? MlpKind::SwiGlu : mlp == "relu2" ? MlpKind::ReluSquared : mlp == "geglu" ? MlpKind::GeGlu : MlpKind::Gelu;
  const std::string norm = t.optional_string("norm").value_or("layernorm");
  if (norm != "layernorm" && norm != "rmsnorm")
    t.fail("norm", fmt::format("must be \"layernorm\" or \"rmsnorm\", got \"{}\"", excerpt(norm)));
  c.norm = norm == "rmsnorm" ? NormKind::RmsNorm : NormKind::LayerNorm;
  c.tied_embeddings = t.boolean("tied_embeddings", false);
  c.learned_positions = t.boolean("learned_positions", false);
  c.bias = t.boolean("bias", false);
  c.qkv_bias = t.boolean("qkv_bias", false);
  c.dropout = t.boolean("dropout", false);
  c.qk_norm = t.boolean("qk_norm", false);
  c.post_norms = t.boolean("post_norms", false);
  if (t.has("attention_window")) c.attention_window = t.positive_int("attention_window");
  if (t.has("full_attention_every")) {
    if (c.attention_window == 0) t.fail("full_attention_every", "needs attention_window: it says which blocks do not slide");
    c.full_attention_every = t.positive_int("full_attention_every");
  }
  if (c.heads % c.kv_heads != 0)
    throw_bad_input("{}: {} ({}) must divide {} ({})", t.source(), t.name("kv_heads"), c.kv_heads, t.name("heads"),
                    c.heads);
  c.attention_sinks = t.boolean("attention_sinks", false);
  if (t.has("moe")) c.moe = read_moe(t.object("moe"), c.layers);
  if (t.has("mla")) {
    c.mla = read_mla(t.object("mla"));
    c.head_dim = c.mla->qk_head_dim();
  }
  const long mtp_layers = t.has("mtp_layers") ? t.non_negative_integer("mtp_layers") : 0;
  if (mtp_layers > 16) t.fail("mtp_layers", fmt::format("is {}; give at most 16 prediction modules", mtp_layers));
  c.mtp_layers = static_cast<int>(mtp_layers);
  return c;
}

Layer read_explicit_layer(const nlohmann::json& j, const std::string& source, size_t i) {
  const JsonFields f(j, source, fmt::format("layers[{}].", i));
  f.reject_unknown({"name", "forward_s", "backward_input_s", "backward_weight_s", "backward_s", "output_bytes",
                    "activation_bytes", "parameter_bytes"});
  ExplicitCosts c;
  c.forward_s = f.figure("forward_s", kSecondsRange);
  c.backward_input_s = f.figure("backward_input_s", kSecondsRange, 0.0);
  c.backward_weight_s = f.figure("backward_weight_s", kSecondsRange, 0.0);
  if (f.has("backward_s")) c.backward_s = f.figure("backward_s", kSecondsRange);
  c.output_bytes = f.figure("output_bytes", kBytesRange, 0.0);
  c.activation_bytes = f.figure("activation_bytes", kBytesRange, 0.0);
  c.parameter_bytes = f.figure("parameter_bytes", kBytesRange, 0.0);
  return Layer{f.optional_string("name").value_or(fmt::format("layer{}", i)), LayerKind::Explicit, c};
}

// "edges": [[from, to], [from, to, bytes], ...]; indices into the layer list, from < to.
std::vector<LayerEdge> read_edges(const JsonFields& top, const std::string& source, int layers) {
  const nlohmann::json& edges = top.required("edges");
  if (!edges.is_array())
    throw_bad_input("{}: edges must be an array of [from, to] or [from, to, bytes] layer pairs", source);
  top.array("edges", kMaxLayers, "edges");
  std::vector<LayerEdge> out;
  for (size_t i = 0; i < edges.size(); ++i) {
    const nlohmann::json& e = edges[i];
    const bool shape = e.is_array() && (e.size() == 2 || e.size() == 3) && e[0].is_number_integer() &&
                       e[1].is_number_integer() && (e.size() == 2 || e[2].is_number());
    if (!shape)
      throw_bad_input("{}: edges[{}] is {}; give [from, to] or [from, to, bytes] with layer indices", source, i,
                      json_excerpt(e));
    LayerEdge edge;
    const long from = e[0].get<long>(), to = e[1].get<long>();
    if (from < 0 || to >= layers || from >= to)
      throw_bad_input("{}: edges[{}] is [{}, {}]; give layer indices with 0 <= from < to < {} (data flows forward)",
                      source, i, from, to, layers);
    edge.from = static_cast<int>(from);
    edge.to = static_cast<int>(to);
    if (e.size() == 3) {
      const double bytes = e[2].get<double>();
      if (!(bytes >= kBytesRange.min && bytes <= kBytesRange.max) || !is_normal_or_zero(bytes))
        throw_bad_input("{}: edges[{}] has bytes {}; give a figure from {} to {} B", source, i, bytes, kBytesRange.min,
                        kBytesRange.max);
      edge.bytes = bytes;
    }
    out.push_back(edge);
  }
  return out;
}

}  // namespace

namespace detail {
Model model_from_pipewright_json(const nlohmann::json& j, const std::string& source) {
  const JsonFields top(j, source);
  top.reject_unknown({"name", "parameters", "total_parameters", "active_parameters", "layers", "transformer", "edges"});
  const std::string name = top.optional_string("name").value_or(model_name_from_source(source));
  if (top.has("layers") && top.has("transformer"))
    throw_bad_input("{}: give either \"layers\" or \"transformer\", not both", source);
  Model m;
  if (top.has("transformer")) {
    m = make_transformer_model(name, read_transformer(top.object("transformer")));
  } else {
    const nlohmann::json& layers = top.required("layers");
    if (!layers.is_array() || layers.empty())
      throw_bad_input("{}: layers must be a non-empty array of layer objects", source);
    top.array("layers", kMaxLayers, "layers");
    m.name = name;
    for (size_t i = 0; i < layers.size(); ++i) m.layers.push_back(read_explicit_layer(layers[i], source, i));
  }
  if (top.has("edges")) m.edges = read_edges(top, source, m.num_layers());
  // What `models --show` prints for people to read; when kept, it must still describe the shape.
  for (const char* key : {"parameters", "total_parameters", "active_parameters"}) {
    if (!top.has(key)) continue;
    const double given = top.non_negative_number(key);
    const double counted = std::string(key) == "active_parameters" ? active_parameter_count(m) : parameter_count(m);
    if (std::abs(given - counted) > 0.5)
      top.fail(key, fmt::format("is {:.0f} but the model's layers hold {:.0f}; remove the field or fix the shape", given,
                                counted));
  }
  return m;
}
}  // namespace detail

std::string model_to_json_text(const Model& model) {
  nlohmann::ordered_json j;
  j["name"] = model.name;
  if (model.transformer) {
    const TransformerConfig& c = *model.transformer;
    nlohmann::ordered_json t;
    if (!c.family.empty()) t["family"] = c.family;
    t["hidden"] = c.hidden;
    t["layers"] = c.layers;
    t["heads"] = c.heads;
    t["kv_heads"] = c.kv_heads;
    t["head_dim"] = c.head_dim;
    t["ffn"] = c.ffn;
    t["vocab"] = c.vocab;
    t["seq_len"] = c.max_seq_len;
    t["mlp"] = to_string(c.mlp);
    t["norm"] = to_text(c.norm);
    t["tied_embeddings"] = c.tied_embeddings;
    t["learned_positions"] = c.learned_positions;
    t["bias"] = c.bias;
    t["qkv_bias"] = c.qkv_bias;
    t["dropout"] = c.dropout;
    if (c.qk_norm) t["qk_norm"] = true;
    if (c.post_norms) t["post_norms"] = true;
    if (c.attention_window > 0) t["attention_window"] = c.attention_window;
    if (c.full_attention_every > 0) t["full_attention_every"] = c.full_attention_every;
    if (c.attention_sinks) t["attention_sinks"] = true;
    if (c.moe) {
      const MoeConfig& m = *c.moe;
      nlohmann::ordered_json o;
      o["experts"] = m.experts;
      o["top_k"] = m.top_k;
      o["expert_ffn"] = m.expert_ffn;
      if (m.shared_expert_ffn > 0) o["shared_expert_ffn"] = m.shared_expert_ffn;
      if (m.shared_expert_gate) o["shared_expert_gate"] = true;
      if (m.expert_bias) o["expert_bias"] = true;
      if (m.router_score_bias) o["router_score_bias"] = true;
      if (m.first_dense > 0) o["first_dense"] = m.first_dense;
      if (m.every > 1) o["every"] = m.every;
      if (!m.dense_blocks.empty()) o["dense_blocks"] = m.dense_blocks;
      if (m.groups > 0) {
        o["groups"] = m.groups;
        o["top_groups"] = m.top_groups;
      }
      if (m.routed_scaling != 1.0) o["routed_scaling"] = m.routed_scaling;
      t["moe"] = o;
    }
    if (c.mla) {
      const MlaConfig& a = *c.mla;
      nlohmann::ordered_json o;
      if (a.q_lora_rank > 0) o["q_lora_rank"] = a.q_lora_rank;
      o["kv_lora_rank"] = a.kv_lora_rank;
      o["qk_nope_head_dim"] = a.qk_nope_head_dim;
      o["qk_rope_head_dim"] = a.qk_rope_head_dim;
      o["v_head_dim"] = a.v_head_dim;
      t["mla"] = o;
    }
    if (c.mtp_layers > 0) t["mtp_layers"] = c.mtp_layers;
    j["transformer"] = t;
  } else {
    nlohmann::ordered_json layers = nlohmann::ordered_json::array();
    for (const Layer& l : model.layers) {
      const ExplicitCosts c = l.explicit_costs.value_or(ExplicitCosts{});
      nlohmann::ordered_json o;
      o["name"] = l.name;
      o["forward_s"] = c.forward_s;
      o["backward_input_s"] = c.backward_input_s;
      o["backward_weight_s"] = c.backward_weight_s;
      if (c.backward_s) o["backward_s"] = *c.backward_s;
      o["output_bytes"] = c.output_bytes;
      o["activation_bytes"] = c.activation_bytes;
      o["parameter_bytes"] = c.parameter_bytes;
      layers.push_back(o);
    }
    j["layers"] = layers;
  }
  if (!model.edges.empty()) {
    nlohmann::ordered_json edges = nlohmann::ordered_json::array();
    for (const LayerEdge& e : model.edges) {
      nlohmann::ordered_json pair = nlohmann::ordered_json::array({e.from, e.to});
      if (e.bytes) pair.push_back(*e.bytes);
      edges.push_back(pair);
    }
    j["edges"] = edges;
  }
  return json_file_text(j, "model");
}

}  // namespace pw
