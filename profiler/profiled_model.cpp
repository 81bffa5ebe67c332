#include "profiler/profiled_model.hpp"

#include <fmt/format.h>

#include "profiler/profile.hpp"

namespace pw {
namespace {

constexpr const char* kFigures[] = {"hidden",    "heads",    "kv_heads",  "head_dim",        "ffn",         "vocab", "seq_len",
                                    "mlp",       "norm",     "bias",      "positions",       "tied_embeddings", "layer_kinds"};

std::string kinds_text(const Model& model) {
  std::string text;
  for (const Layer& l : model.layers) {
    const std::string kind = layer_kind_name(l.kind);
    if (text.find(kind) == std::string::npos) text += (text.empty() ? "" : ",") + kind;
  }
  return text;
}

bool is_number_figure(const std::string& name) {
  return name == "hidden" || name == "heads" || name == "kv_heads" || name == "head_dim" || name == "ffn" ||
         name == "vocab" || name == "seq_len";
}

}  // namespace

std::optional<ProfiledModel> profiled_model_of(const Model& model) {
  if (!model.transformer || model.has_explicit_costs()) return std::nullopt;
  const TransformerConfig& c = *model.transformer;
  ProfiledModel p;
  p.name = model.name;
  p.layers = model.num_blocks();
  p.figures = {{"hidden", std::to_string(c.hidden)},
               {"heads", std::to_string(c.heads)},
               {"kv_heads", std::to_string(c.kv_heads)},
               {"head_dim", std::to_string(c.head_dim)},
               {"ffn", std::to_string(c.ffn)},
               {"vocab", std::to_string(c.vocab)},
               {"seq_len", std::to_string(model.default_seq_len())},
               {"mlp", to_string(c.mlp)},
               {"norm", c.norm == NormKind::RmsNorm ? "rmsnorm" : "layernorm"},
               {"bias", c.bias ? "all" : c.qkv_bias ? "qkv" : "none"},
               {"positions", c.learned_positions ? "learned" : "rotary"},
               {"tied_embeddings", c.tied_embeddings ? "true" : "false"},
               {"layer_kinds", kinds_text(model)}};
  return p;
}

std::optional<FigureDifference> first_difference(const ProfiledModel& recorded, const ProfiledModel& model) {
  for (const ModelFigure& theirs : model.figures)
    for (const ModelFigure& ours : recorded.figures)
      if (ours.name == theirs.name && ours.value != theirs.value) return FigureDifference{ours.name, ours.value, theirs.value};
  return std::nullopt;
}

nlohmann::ordered_json profiled_model_json(const ProfiledModel& m) {
  nlohmann::ordered_json j = {{"name", m.name}, {"layers", m.layers}};
  for (const ModelFigure& f : m.figures) {
    if (is_number_figure(f.name))
      j[f.name] = std::stol(f.value);
    else if (f.name == "tied_embeddings")
      j[f.name] = f.value == "true";
    else
      j[f.name] = f.value;
  }
  return j;
}

ProfiledModel profiled_model_from_json(const JsonFields& f) {
  f.reject_unknown({"name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "seq_len", "mlp", "norm",
                    "bias", "positions", "tied_embeddings", "layer_kinds"});
  ProfiledModel m;
  m.name = f.string("name");
  m.layers = static_cast<int>(f.non_negative_integer("layers"));
  for (const char* name : kFigures) {
    if (is_number_figure(name))
      m.figures.push_back({name, std::to_string(f.positive_integer(name))});
    else if (std::string(name) == "tied_embeddings")
      m.figures.push_back({name, f.boolean(name, false) ? "true" : "false"});
    else
      m.figures.push_back({name, f.string(name)});
  }
  return m;
}

}  // namespace pw
