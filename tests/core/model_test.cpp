#include <catch2/catch.hpp>

#include "../error_text.hpp"

#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/model.hpp"

using namespace pw;

namespace {

std::string example(const char* name) { return std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/" + name; }

void check_same_config(const TransformerConfig& a, const TransformerConfig& b) {
  CHECK(a.family == b.family);
  CHECK(a.hidden == b.hidden);
  CHECK(a.layers == b.layers);
  CHECK(a.heads == b.heads);
  CHECK(a.kv_heads == b.kv_heads);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.ffn == b.ffn);
  CHECK(a.vocab == b.vocab);
  CHECK(a.max_seq_len == b.max_seq_len);
  CHECK(a.mlp == b.mlp);
  CHECK(a.norm == b.norm);
  CHECK(a.tied_embeddings == b.tied_embeddings);
  CHECK(a.learned_positions == b.learned_positions);
  CHECK(a.bias == b.bias);
  CHECK(a.qkv_bias == b.qkv_bias);
  CHECK(a.dropout == b.dropout);
}

}  // namespace

TEST_CASE("a transformer model is embedding, L blocks and a head") {
  const Model m = model_preset("gpt3-1.3b");
  REQUIRE(m.num_layers() == 26);
  CHECK(m.layers.front().name == "embedding");
  CHECK(m.layers.front().kind == LayerKind::Embedding);
  CHECK(m.layers[1].name == "block0");
  CHECK(m.layers[24].name == "block23");
  CHECK(m.layers[24].kind == LayerKind::Block);
  CHECK(m.layers.back().name == "head");
  CHECK(m.layers.back().kind == LayerKind::Head);
  CHECK(m.num_blocks() == 24);
  CHECK(m.block_index(0) == 1);
  CHECK(m.block_index(23) == 24);
  const std::vector<int> blocks = m.block_indices();
  REQUIRE(blocks.size() == 24);
  CHECK(blocks.front() == 1);
  CHECK(blocks.back() == 24);
  CHECK_FALSE(m.has_explicit_costs());
  CHECK(m.default_seq_len() == 2048);
  // Cut to one block: the same embedding, block and head, one block of them.
  const Model one = one_block_per_kind(m);
  REQUIRE(one.num_layers() == 3);
  CHECK(one.name == m.name);
  CHECK(one.num_blocks() == 1);
  CHECK(one.layers[1].kind == LayerKind::Block);
  CHECK(one.transformer->hidden == m.transformer->hidden);
  // Copies of it, for a profiler's pass: the embedding, 4 blocks of the same shape, the head.
  const Model four = blocks_per_kind_copies(m, 4);
  REQUIRE(four.num_layers() == 6);
  CHECK(four.num_blocks() == 4);
  CHECK(four.layers.front().kind == LayerKind::Embedding);
  CHECK(four.layers.back().kind == LayerKind::Head);
}

TEST_CASE("copies of an MoE model's blocks alternate its dense and MoE block, one of each a copy") {
  const Model deepseek = model_preset("deepseek-v3");
  const Model three = blocks_per_kind_copies(deepseek, 3);
  REQUIRE(three.num_blocks() == 6);
  for (int i = 0; i < 6; ++i) CHECK(three.transformer->moe_block(i) == (i % 2 == 1));
  const Model mixtral = blocks_per_kind_copies(model_preset("mixtral-8x7b"), 2);
  REQUIRE(mixtral.num_blocks() == 2);
  CHECK(mixtral.transformer->moe_block(0));
  CHECK(mixtral.transformer->moe_block(1));
}

TEST_CASE("presets carry the published shapes and are listed sorted") {
  const std::vector<std::string> expected = {"deepseek-v3",   "gpt-oss-120b",  "gpt3-1.3b",       "gpt3-13b",
                                             "gpt3-175b",     "gpt3-2.7b",     "gpt3-6.7b",       "llama2-13b",
                                             "llama2-70b",    "llama2-7b",     "llama3-405b",     "llama3-70b",
                                             "llama3-8b",     "mixtral-8x22b", "mixtral-8x7b",    "qwen3-235b-a22b",
                                             "qwen3-30b-a3b"};
  CHECK(model_preset_names() == expected);

  const TransformerConfig g = *model_preset("gpt3-175b").transformer;
  CHECK(g.hidden == 12288);
  CHECK(g.layers == 96);
  CHECK(g.heads == 96);
  CHECK(g.kv_heads == 96);
  CHECK(g.head_dim == 128);
  CHECK(g.ffn == 4 * 12288);
  CHECK(g.vocab == 51200);
  CHECK(g.max_seq_len == 2048);
  CHECK(g.mlp == MlpKind::Gelu);
  CHECK(g.norm == NormKind::LayerNorm);
  CHECK(g.tied_embeddings);
  CHECK(g.learned_positions);
  CHECK(g.bias);
  CHECK(g.dropout);

  const TransformerConfig l = *model_preset("llama3-405b").transformer;
  CHECK(l.hidden == 16384);
  CHECK(l.ffn == 53248);
  CHECK(l.layers == 126);
  CHECK(l.heads == 128);
  CHECK(l.kv_heads == 8);
  CHECK(l.vocab == 128256);
  CHECK(l.max_seq_len == 8192);
  CHECK(l.mlp == MlpKind::SwiGlu);
  CHECK(l.norm == NormKind::RmsNorm);
  CHECK_FALSE(l.tied_embeddings);
  CHECK_FALSE(l.bias);
  CHECK_FALSE(l.dropout);
  CHECK(model_preset("llama2-70b").transformer->kv_heads == 8);
  CHECK(model_preset("llama2-13b").transformer->ffn == 13824);
}

TEST_CASE("an unknown model name lists the presets") {
  CHECK(bad_input([] { model_preset("gpt5"); }) ==
        "unknown model 'gpt5'; known models: deepseek-v3, gpt-oss-120b, gpt3-1.3b, gpt3-13b, gpt3-175b, gpt3-2.7b, "
        "gpt3-6.7b, llama2-13b, llama2-70b, llama2-7b, llama3-405b, llama3-70b, llama3-8b, mixtral-8x22b, "
        "mixtral-8x7b, qwen3-235b-a22b, qwen3-30b-a3b (or give a path to a config.json or pipewright model JSON)");
  CHECK(bad_input([] { load_model("gpt5"); }).starts_with("unknown model 'gpt5'; known models: deepseek-v3"));
}

TEST_CASE("GPT-3 175B parameter count follows Narayanan's formula") {
  // P = 12 L h^2 (1 + 13/(12h) + (V+s)/(12 L h)) = 12 L h^2 + 13 L h + (V + s) h counts tied embeddings
  // once and leaves out the final LayerNorm (2h), which our count includes: P + 2h exactly.
  const std::int64_t L = 96, h = 12288, V = 51200, s = 2048;
  const std::int64_t formula = 12 * L * h * h + 13 * L * h + (V + s) * h;
  CHECK(formula == 174615822336);  // "175B"
  CHECK(parameter_count(model_preset("gpt3-175b")) == static_cast<double>(formula + 2 * h));
  const double factored = 12.0 * L * h * h * (1 + 13.0 / (12 * h) + double(V + s) / (12.0 * L * h));
  CHECK(parameter_count(model_preset("gpt3-175b")) == Approx(factored + 2 * h).epsilon(1e-12));
}

TEST_CASE("Llama parameter counts match the published sizes") {
  // Per block: h(a hd) + 2h(k hd) + (a hd)h + 3hf + 2h (RMSNorm weights); embedding and untied head
  // V h each; final norm h.
  CHECK(parameter_count(model_preset("llama2-7b")) == 6738415616.0);
  CHECK(parameter_count(model_preset("llama3-8b")) == 8030261248.0);
  CHECK(parameter_count(model_preset("llama3-70b")) == 70553706496.0);
  CHECK(parameter_count(model_preset("llama2-70b")) == Approx(68.98e9).epsilon(1e-3));
  CHECK(parameter_count(model_preset("llama3-405b")) == Approx(405.85e9).epsilon(1e-3));
}

TEST_CASE("presets round-trip through the pipewright model JSON") {
  for (const std::string& name : model_preset_names()) {
    INFO(name);
    const Model m = model_preset(name);
    const std::string text = model_to_json_text(m);
    const Model back = model_from_json_text(text, name + ".json");
    CHECK(back.name == name);
    REQUIRE(back.transformer);
    check_same_config(*back.transformer, *m.transformer);
    CHECK(back.num_layers() == m.num_layers());
    CHECK(model_to_json_text(back) == text);
    CHECK(parameter_count(back) == parameter_count(m));
  }
}

TEST_CASE("the transformer form fills defaults and names missing fields") {
  const Model m = model_from_json_text(
      R"({"name": "small", "transformer": {"hidden": 512, "layers": 4, "heads": 8, "ffn": 2048,
          "vocab": 1000, "seq_len": 256}})",
      "small.json");
  CHECK(m.name == "small");
  CHECK(m.num_blocks() == 4);
  CHECK(m.transformer->kv_heads == 8);
  CHECK(m.transformer->head_dim == 64);
  CHECK(m.transformer->mlp == MlpKind::Gelu);
  CHECK(m.transformer->norm == NormKind::LayerNorm);
  CHECK_FALSE(m.transformer->tied_embeddings);

  CHECK(bad_input([] {
          model_from_json_text(R"({"transformer": {"hidden": 512, "layers": 4, "heads": 8, "ffn": 2048,
                                   "seq_len": 256}})",
                               "m.json");
        }) == "m.json: missing required field 'transformer.vocab'");
  CHECK(bad_input([] {
          model_from_json_text(R"({"transformer": {"hidden": 512, "layers": 4, "heads": 8, "kv_heads": 3,
                                   "ffn": 2048, "vocab": 10, "seq_len": 256}})",
                               "m.json");
        }) == "m.json: transformer.kv_heads (3) must divide transformer.heads (8)");
  CHECK(bad_input([] {
          model_from_json_text(R"({"transformer": {"hidden": 512, "layers": 4, "heads": 8, "mlp": "relu",
                                   "ffn": 2048, "vocab": 10, "seq_len": 256}})",
                               "m.json");
        }) == "m.json: transformer.mlp must be \"gelu\", \"swiglu\", \"geglu\" or \"relu2\", got \"relu\"");
  CHECK(bad_input([] {
          model_from_json_text(R"({"transformer": {"hiden": 512}})", "m.json");
        }).starts_with("m.json: unknown field 'transformer.hiden'; known fields: family, hidden,"));
  CHECK(bad_input([] {
          model_from_json_text(R"({"transformer": {"hidden": 0, "layers": 4, "heads": 8, "ffn": 1, "vocab": 1,
                                   "seq_len": 1}})",
                               "m.json");
        }) == "m.json: transformer.hidden must be positive, got 0");
}

TEST_CASE("explicit-cost layers read with defaults and round-trip") {
  const Model m = load_model(example("tiny-uniform.json"));
  CHECK(m.name == "tiny-uniform");
  CHECK_FALSE(m.transformer);
  REQUIRE(m.num_layers() == 8);
  CHECK(m.num_blocks() == 8);
  CHECK(m.block_index(5) == 5);
  CHECK(m.block_indices() == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(m.has_explicit_costs());
  CHECK(m.default_seq_len() == 0);
  for (const Layer& l : m.layers) {
    CHECK(l.kind == LayerKind::Explicit);
    REQUIRE(l.explicit_costs);
    CHECK(l.explicit_costs->forward_s == 0.001);
    CHECK(l.explicit_costs->backward_input_s == 0.001);
    CHECK(l.explicit_costs->backward_weight_s == 0.001);
  }
  // Parameters are bf16 weights: parameter_bytes / 2.
  CHECK(parameter_count(m) == 8 * m.layers[0].explicit_costs->parameter_bytes / 2);
  const std::string text = model_to_json_text(m);
  CHECK(model_to_json_text(model_from_json_text(text, "again.json")) == text);

  const Model d = model_from_json_text(R"({"layers": [{"forward_s": 2.5}, {"name": "x", "forward_s": 0}]})",
                                       "dir/two-layers.json");
  CHECK(d.name == "two-layers");
  CHECK(d.layers[0].name == "layer0");
  CHECK(d.layers[0].explicit_costs->forward_s == 2.5);
  CHECK(d.layers[0].explicit_costs->backward_input_s == 0);
  CHECK(d.layers[0].explicit_costs->parameter_bytes == 0);
  CHECK(d.layers[1].name == "x");
  CHECK_FALSE(d.layers[0].explicit_costs->backward_s);

  // A one-pass backward where measured: read, written back, and refused out of range.
  const std::string one_pass = R"({"layers": [{"forward_s": 1, "backward_input_s": 0.5, "backward_weight_s": 0.5, "backward_s": 0.75}]})";
  const Model o = model_from_json_text(one_pass, "o.json");
  REQUIRE(o.layers[0].explicit_costs->backward_s);
  CHECK(*o.layers[0].explicit_costs->backward_s == 0.75);
  const std::string written = model_to_json_text(o);
  CHECK(written.find("\"backward_s\": 0.75") != std::string::npos);
  CHECK(model_to_json_text(model_from_json_text(written, "o.json")) == written);
  CHECK(model_to_json_text(d).find("backward_s") == std::string::npos);
  CHECK(bad_input([] { model_from_json_text(R"({"layers": [{"forward_s": 1, "backward_s": -1}]})", "m.json"); }) ==
        "m.json: layers[0].backward_s is -1 s; give a figure from 0 to 1000000 s");
}

TEST_CASE("explicit-cost errors name the layer field") {
  const auto with_forward = [](const std::string& value) {
    return R"({"layers": [{"forward_s": 1}, {"forward_s": 1}, {"forward_s": 1}, {"forward_s": )" + value + "}]}";
  };
  CHECK(bad_input([&] { model_from_json_text(with_forward("-1"), "m.json"); }) ==
        "m.json: layers[3].forward_s is -1 s; give a figure from 0 to 1000000 s");
  CHECK(bad_input([&] { model_from_json_text(with_forward("\"fast\""), "m.json"); }) ==
        "m.json: layers[3].forward_s must be a number, got \"fast\"");
  CHECK(bad_input([] { model_from_json_text(R"({"layers": [{"forward_s": 1}, {"name": "b"}]})", "m.json"); }) ==
        "m.json: missing required field 'layers[1].forward_s'");
  CHECK(bad_input([] {
          model_from_json_text(R"({"layers": [{"forward_s": 1, "backward_input_s": -0.5}]})", "m.json");
        }) == "m.json: layers[0].backward_input_s is -0.5 s; give a figure from 0 to 1000000 s");
  CHECK(bad_input([] { model_from_json_text(R"({"layers": []})", "m.json"); }) ==
        "m.json: layers must be a non-empty array of layer objects");
  CHECK(bad_input([] { model_from_json_text(R"({"layers": [3]})", "m.json"); }) ==
        "m.json: layers[0] must be an object");
}

TEST_CASE("malformed or unrecognised JSON is bad input") {
  CHECK(bad_input([] { model_from_json_text(R"({"layers": [)", "m.json"); }) ==
        "m.json: malformed JSON at byte 13: syntax error while parsing value - unexpected end of input; expected "
        "'[', '{', or a literal");
  CHECK(bad_input([] { model_from_json_text(R"({"name": "x"})", "m.json"); }) ==
        "m.json: not a model: expected a Hugging Face config.json (with \"model_type\") or a pipewright model JSON "
        "(with \"layers\" or \"transformer\")");
  CHECK(bad_input([] { model_from_json_text("[1, 2]", "m.json"); }) ==
        "m.json: expected a JSON object describing a model, got array");
}

TEST_CASE("load_model takes a path or a preset name") {
  CHECK(load_model("llama3-8b").name == "llama3-8b");
  CHECK(bad_input([] { load_model("/nonexistent/m.json"); }) == "model file '/nonexistent/m.json' not found");
  CHECK(load_model(example("llama3-8b.config.json")).transformer->vocab == 128256);
}
