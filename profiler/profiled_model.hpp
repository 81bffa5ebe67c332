#pragma once
// What model a profile measured: its name and the shape figures that decide its layers' costs, so that a
// profile of another model is refused rather than silently timing the wrong layers.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_text.hpp"
#include "core/model.hpp"

namespace pw {

// One figure that decides costs, as text: {"hidden", "64"}, {"mlp", "swiglu"}.
struct ModelFigure {
  std::string name;
  std::string value;
};

struct ProfiledModel {
  std::string name;  // recorded for the reader, not compared (a renamed copy times the same)
  int layers = 0;    // transformer blocks, not compared: every block has the same shape
  // hidden, heads, kv_heads, head_dim, ffn, vocab, seq_len (the model's default), mlp, norm, bias,
  // positions, tied_embeddings and layer_kinds, in that order: compared one by one.
  std::vector<ModelFigure> figures;
};

// The identity of a transformer model; nullopt for models with explicit per-layer costs (nothing profiled).
std::optional<ProfiledModel> profiled_model_of(const Model& model);

// The first figure where `recorded` and `model` differ, or nullopt when they agree.
struct FigureDifference {
  std::string figure;
  std::string recorded;
  std::string model;
};
std::optional<FigureDifference> first_difference(const ProfiledModel& recorded, const ProfiledModel& model);

// The profile's "model" object and back (BadInput naming the field for anything malformed).
nlohmann::ordered_json profiled_model_json(const ProfiledModel& model);
ProfiledModel profiled_model_from_json(const JsonFields& fields);

}  // namespace pw
