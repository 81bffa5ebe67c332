// The model a profile records: its figures, their round trip through the profile's JSON, old profiles without
// it, and which figure differs first.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "profiler/profile.hpp"
#include "profiler/profiled_model.hpp"
#include "../executor/executor_test_util.hpp"

using namespace pw;

namespace {

std::string figures_text(const ProfiledModel& m) {
  std::string text;
  for (const ModelFigure& f : m.figures) text += f.name + "=" + f.value + " ";
  return text;
}

const char* kOld = R"({"format": "pipewright-profile", "version": 1, "tool": "t", "layers": []})";

}  // namespace

TEST_CASE("a profile records the model it measured, and reads it back") {
  const Model llama = test::tiny_llama(3);
  const std::optional<ProfiledModel> m = profiled_model_of(llama);
  REQUIRE(m);
  CHECK(m->name == "test-llama");
  CHECK(m->layers == 3);
  CHECK(figures_text(*m) ==
        "hidden=16 heads=4 kv_heads=2 head_dim=4 ffn=24 vocab=32 seq_len=8 mlp=swiglu norm=rmsnorm bias=none "
        "positions=rotary tied_embeddings=false layer_kinds=embedding,block,head ");

  Profile p;
  p.tool = "test";
  p.model = m;
  const std::string text = profile_to_json_text(p);
  CHECK(text.find(R"("model": {
    "name": "test-llama",
    "layers": 3,
    "hidden": 16,)") != std::string::npos);
  CHECK(text.find(R"("tied_embeddings": false,
    "layer_kinds": "embedding,block,head"
  })") != std::string::npos);
  const Profile back = profile_from_json_text(text, "p.json");
  REQUIRE(back.model);
  CHECK(back.model->name == "test-llama");
  CHECK(back.model->layers == 3);
  CHECK(figures_text(*back.model) == figures_text(*m));
  CHECK(profile_to_json_text(back) == text);

  // Written before pipewright recorded the model: read as before, with no model.
  CHECK_FALSE(profile_from_json_text(kOld, "old.json").model);
  // Explicit per-layer costs: nothing for a profile to time, no identity.
  Model costs;
  costs.name = "costs";
  Layer l;
  l.kind = LayerKind::Explicit;
  l.explicit_costs = ExplicitCosts{};
  costs.layers = {l};
  CHECK_FALSE(profiled_model_of(costs));
}

TEST_CASE("the first figure that differs, in the recorded order, name and depth are not compared") {
  const ProfiledModel llama = *profiled_model_of(test::tiny_llama(3));
  CHECK_FALSE(first_difference(llama, *profiled_model_of(test::tiny_llama(30))));
  TransformerConfig renamed = *test::tiny_llama(3).transformer;
  CHECK_FALSE(first_difference(llama, *profiled_model_of(make_transformer_model("another-name", renamed))));

  const std::optional<FigureDifference> gpt = first_difference(llama, *profiled_model_of(test::tiny_gpt(3)));
  REQUIRE(gpt);
  CHECK(gpt->figure == "kv_heads");
  CHECK(gpt->recorded == "2");
  CHECK(gpt->model == "4");

  TransformerConfig wide = renamed;
  wide.ffn = 48;
  wide.vocab = 64;
  const std::optional<FigureDifference> d = first_difference(llama, *profiled_model_of(make_transformer_model("w", wide)));
  REQUIRE(d);
  CHECK(d->figure == "ffn");

  TransformerConfig tied = renamed;
  tied.tied_embeddings = true;
  CHECK(first_difference(llama, *profiled_model_of(make_transformer_model("t", tied)))->figure == "tied_embeddings");
}

TEST_CASE("a malformed model in a profile names the field") {
  auto error = [](const std::string& model) {
    try {
      profile_from_json_text(R"({"format": "pipewright-profile", "version": 1, "layers": [], "model": )" + model + "}",
                             "p.json");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::BadInput);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error(R"({"name": "m", "layers": 2})") == "p.json: missing required field 'model.hidden'");
  CHECK(error(R"({"name": "m", "layers": 2, "hidden": 0})") == "p.json: model.hidden must be positive, got 0");
  CHECK(error(R"({"name": "m", "depth": 2})") ==
        "p.json: unknown field 'model.depth'; known fields: name, layers, hidden, heads, kv_heads, head_dim, ffn, vocab, "
        "seq_len, mlp, norm, bias, positions, tied_embeddings, layer_kinds");
}
