// KV cache sizes as vLLM allocates them (core/kv_cache.hpp), in closed form for a grouped-query and a
// latent-attention model.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/kv_cache.hpp"
#include "core/model.hpp"

using namespace pw;

namespace {

LayerRange all_layers(const Model& m) { return LayerRange{0, m.num_layers() - 1}; }

}  // namespace

TEST_CASE("Llama 3 70B: 8 KV heads of 128, split over tp, replicated past 8") {
  const Model m = model_preset("llama3-70b");
  // K and V: 2 x 8 heads x 128 x 2 bytes.
  CHECK(kv_bytes_per_token_per_layer(m, 1) == 4096);
  CHECK(kv_bytes_per_token_per_layer(m, 8) == 512);
  CHECK(kv_bytes_per_token_per_layer(m, 16) == 512);  // max(1, 8 / 16) heads: replicated
  CHECK(kv_bytes_per_token_per_layer(m, 8, KvCacheDtype::Fp8) == 256);
  // 80 blocks: 320 KiB a token on one GPU, 2.5 GiB for an 8192-token sequence.
  CHECK(kv_bytes_for_tokens(m, all_layers(m), 1, 1) == 80 * 4096);
  CHECK(kv_bytes_for_tokens(m, all_layers(m), 1, 8192) == 80.0 * 4096 * 8192);
  // A pipeline stage keeps its own blocks' only: layers 0 (embedding) to 20 hold blocks 0 to 19.
  CHECK(kv_bytes_for_tokens(m, LayerRange{0, 20}, 8, 1000) == 20.0 * 512 * 1000);
}

TEST_CASE("DeepSeek-V3: a 512 + 64 latent a token and layer, the same on every tp rank") {
  const Model m = model_preset("deepseek-v3");
  CHECK(kv_bytes_per_token_per_layer(m, 1) == (512 + 64) * 2);
  CHECK(kv_bytes_per_token_per_layer(m, 8) == (512 + 64) * 2);
  CHECK(kv_bytes_per_token_per_layer(m, 8, KvCacheDtype::Fp8) == 512 + 64);
  // 61 blocks; the MTP module is not served.
  CHECK(kv_bytes_for_tokens(m, all_layers(m), 8, 1) == 61 * 1152);
}

TEST_CASE("sliding-window blocks keep at most their window") {
  Model m = model_preset("llama3-8b");
  m.transformer->attention_window = 4096;
  m.transformer->full_attention_every = 2;  // blocks 1, 3, ... attend to everything
  const double per = kv_bytes_per_token_per_layer(m, 1);
  CHECK(kv_bytes_for_tokens(m, all_layers(m), 1, 10000) == 16 * per * 4096 + 16 * per * 10000);
  CHECK(kv_bytes_for_tokens(m, all_layers(m), 1, 100) == 32 * per * 100);
  Model explicit_model;
  explicit_model.name = "costs";
  CHECK_THROWS_AS(kv_bytes_per_token_per_layer(explicit_model, 1), Error);
}
