// The CPU layers (and the CUDA ones built from them) refuse model features they do not compute, so that a run
// never computes something other than what was simulated.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "core/model.hpp"
#include "executor/cpu_layers.hpp"

using namespace pw;

TEST_CASE("the CPU layers refuse what they do not compute: squared ReLU, query-key norms, sliding windows") {
  TransformerConfig c = model_preset("llama3-8b").transformer.value();
  c.layers = 2;
  c.mlp = MlpKind::ReluSquared;
  CHECK(bad_input([&] { check_cpu_model(make_transformer_model("n", c)); }) ==
        "--model: 'n' has a squared-ReLU MLP, which pipewright's layers do not compute; use --compute sleep");
  c.mlp = MlpKind::SwiGlu;
  c.attention_window = 16;
  CHECK(bad_input([&] { check_cpu_model(make_transformer_model("w", c)); }) ==
        "--model: 'w' has sliding-window attention, which pipewright's layers do not compute; use --compute sleep");
}
