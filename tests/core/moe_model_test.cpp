// Mixture-of-experts and latent-attention models: their parameter counts in closed form against the published
// ones, the Hugging Face configs of each MoE type (transformers' configuration_*.py and modeling_*.py), and
// pipewright's model JSON round trip.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/model.hpp"
#include "../error_text.hpp"

using namespace pw;

namespace {

// Billions, rounded as a model card rounds them.
double billions(double n, int digits) { return std::round(n / 1e9 * std::pow(10, digits)) / std::pow(10, digits); }

// DeepSeek-V3's config.json (deepseek-ai/DeepSeek-V3), the fields pipewright reads.
const char* kDeepSeekV3 = R"({"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
    "n_shared_experts": 1, "n_routed_experts": 256, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
    "moe_layer_freq": 1, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "vocab_size": 129280, "max_position_embeddings": 163840, "num_nextn_predict_layers": 1,
    "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5, "tie_word_embeddings": false, "rope_scaling": {"type": "yarn", "factor": 40,
    "original_max_position_embeddings": 4096}})";

}  // namespace

TEST_CASE("DeepSeek-V3: 671B parameters, 37B active, in closed form and from its config.json") {
  const double h = 7168, H = 128, V = 129280, E = 256, k = 8, f = 2048;
  // MLA: q down (h x 1536) and its norm, q up (1536 x H x 192), kv down (h x (512 + 64)) and its norm, kv up
  // (512 x H x (128 + 128)), output (H x 128 x h).
  const double attention = h * 1536 + 1536 + 1536 * H * 192 + h * 576 + 512 + 512 * H * 256 + H * 128 * h;
  const double dense = attention + 2 * h + 3 * h * 18432;
  // Router (E x h; its score-correction bias is a buffer, as in transformers), one shared expert, 256 routed ones.
  const double moe = attention + 2 * h + E * h + 3 * h * f + E * 3 * h * f;
  const double active = attention + 2 * h + E * h + 3 * h * f + k * 3 * h * f;
  const double total = 2 * V * h + 3 * dense + 58 * moe + h;
  const Model preset = model_preset("deepseek-v3");
  CHECK(parameter_count(preset) == total);
  CHECK(total == 671026404352.0);
  CHECK(billions(total, 0) == 671);  // "671B total parameters" (DeepSeek-V3 technical report), MTP excluded
  CHECK(active_parameter_count(preset) == 2 * V * h + 3 * dense + 58 * active + h);
  // "37B activated"; DeepSeek's README_WEIGHTS counts 36.7B without the input embedding (V x h).
  CHECK(billions(active_parameter_count(preset), 0) == 38);
  CHECK(billions(active_parameter_count(preset) - V * h, 1) == 36.6);

  const Model read = model_from_json_text(kDeepSeekV3, "DeepSeek-V3/config.json");
  CHECK(parameter_count(read) == total);
  CHECK(active_parameter_count(read) == active_parameter_count(preset));
  const TransformerConfig& c = *read.transformer;
  REQUIRE(c.moe);
  REQUIRE(c.mla);
  CHECK(*c.moe == *preset.transformer->moe);
  CHECK(*c.mla == *preset.transformer->mla);
  CHECK(c.head_dim == 192);
  CHECK(c.max_seq_len == 4096);
  CHECK(c.mtp_layers == 1);
  // The blocks, then the MTP module, then the head (Megatron-Core's layout puts "m" before "L").
  CHECK(read.layers[read.num_layers() - 2].kind == LayerKind::Mtp);
  CHECK(read.layers[read.num_layers() - 2].block == 61);
  CHECK_FALSE(c.moe_block(2));
  CHECK(c.moe_block(3));
  CHECK(c.moe_block(61));  // the MTP module's block is MoE
  // The MTP module: two norms, the 2h -> h projection, one MoE block, the final norm (11.6B; DeepSeek's
  // README_WEIGHTS: "11.5B unique parameters" besides its shared embedding and head), and the embedding
  // copy it holds on the last stage.
  const LayerParameters mtp = layer_parameters(c, LayerKind::Mtp, 61, 1);
  CHECK(mtp.total() == moe + 3 * h + 2 * h * h + V * h);
  CHECK(billions(mtp.total() - V * h, 1) == 11.6);
}

TEST_CASE("Mixtral, Qwen3-MoE and gpt-oss presets match their published counts") {
  // Mixtral 8x7B: 8 experts of 14336, top 2, router 8 x h; "46.7B total, 12.9B per token" (Mistral AI).
  const double h = 4096, V = 32000;
  const double attention = h * 4096 + 2 * h * 1024 + 4096 * h;
  const double block = attention + 2 * h + 8 * h + 8 * 3 * h * 14336;
  const double active_block = attention + 2 * h + 8 * h + 2 * 3 * h * 14336;
  const Model mixtral = model_preset("mixtral-8x7b");
  CHECK(parameter_count(mixtral) == 2 * V * h + 32 * block + h);
  CHECK(active_parameter_count(mixtral) == 2 * V * h + 32 * active_block + h);
  CHECK(billions(parameter_count(mixtral), 1) == 46.7);
  CHECK(billions(active_parameter_count(mixtral), 1) == 12.9);
  CHECK(billions(parameter_count(model_preset("mixtral-8x22b")), 0) == 141);
  CHECK(billions(active_parameter_count(model_preset("mixtral-8x22b")), 0) == 39);
  // Qwen3 model cards: 30.5B / 3.3B and 235B / 22B.
  CHECK(billions(parameter_count(model_preset("qwen3-30b-a3b")), 1) == 30.5);
  CHECK(billions(active_parameter_count(model_preset("qwen3-30b-a3b")), 1) == 3.4);
  CHECK(billions(parameter_count(model_preset("qwen3-235b-a22b")), 0) == 235);
  CHECK(billions(active_parameter_count(model_preset("qwen3-235b-a22b")), 0) == 22);
  // gpt-oss-120b's model card: 116.83B total, 5.13B active without the input embedding (201088 x 2880).
  const Model oss = model_preset("gpt-oss-120b");
  CHECK(billions(parameter_count(oss), 2) == 116.83);
  CHECK(billions(active_parameter_count(oss) - 201088.0 * 2880, 2) == 5.13);
}

TEST_CASE("Hugging Face MoE configs: which blocks are MoE, shared experts, and their widths") {
  // Qwen1.5-MoE-A2.7B (qwen2_moe): 60 experts of 1408, top 4, a gated shared expert of 5632, q/k/v biases;
  // "14.3B parameters in total and 2.7B activated" (its model card).
  const Model q2 = model_from_json_text(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
      "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
      "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 1,
      "mlp_only_layers": [], "vocab_size": 151936, "max_position_embeddings": 8192, "tie_word_embeddings": false})",
                                        "qwen2moe.json");
  const TransformerConfig& c2 = *q2.transformer;
  REQUIRE(c2.moe);
  CHECK(c2.moe->shared_expert_ffn == 5632);
  CHECK(c2.moe->shared_expert_gate);
  CHECK(c2.qkv_bias);
  CHECK(billions(parameter_count(q2), 1) == 14.3);
  CHECK(billions(active_parameter_count(q2), 1) == 2.7);

  // Qwen3-MoE with decoder_sparse_step 2 and mlp_only_layers [1]: (i + 1) % 2 == 0 and not listed.
  const Model q3 = model_from_json_text(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 6,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128,
      "moe_intermediate_size": 16, "num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 2,
      "mlp_only_layers": [3], "vocab_size": 100, "max_position_embeddings": 64})", "q3.json");
  const TransformerConfig& c3 = *q3.transformer;
  CHECK(c3.qk_norm);
  CHECK(c3.head_dim == 32);
  std::string pattern;
  for (int i = 0; i < 6; ++i) pattern += c3.moe_block(i) ? "M" : "d";
  CHECK(pattern == "dMdddM");

  // Mixtral: every block MoE, intermediate_size the experts' width.
  const Model mx = model_from_json_text(R"({"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "num_local_experts": 8,
      "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": null})",
                                        "mixtral.json");
  CHECK(parameter_count(mx) == parameter_count(model_preset("mixtral-8x7b")));

  // gpt-oss: alternating sliding and full layers (layer_types), sinks, biases everywhere.
  const Model oss = model_from_json_text(R"({"model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 36,
      "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880,
      "num_local_experts": 128, "num_experts_per_tok": 4, "experts_per_token": 4, "vocab_size": 201088,
      "sliding_window": 128, "max_position_embeddings": 131072, "tie_word_embeddings": false,
      "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096},
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention",
        "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
        "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention",
        "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
        "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention",
        "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
        "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention",
        "sliding_attention", "full_attention"]})", "gpt-oss-120b.json");
  CHECK(parameter_count(oss) == parameter_count(model_preset("gpt-oss-120b")));
  CHECK(oss.transformer->block_window(0) == 128);
  CHECK(oss.transformer->block_window(1) == 0);
  CHECK(oss.transformer->max_seq_len == 4096);

  // Llama 4 Scout's language model (text_config): 16 experts of 8192, top 1, a shared expert of 8192,
  // dense blocks of intermediate_size_mlp, chunked attention on three of every four layers. Meta: 17B active,
  // 109B total with the vision encoder (107.8B for the text model).
  const Model scout = model_from_json_text(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
      "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
      "head_dim": 128, "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_local_experts": 16,
      "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "vocab_size": 202048,
      "max_position_embeddings": 10485760, "attention_chunk_size": 8192, "tie_word_embeddings": false}})",
                                           "scout.json");
  CHECK(billions(parameter_count(scout), 1) == 107.8);
  CHECK(billions(active_parameter_count(scout), 0) == 17);
  CHECK(scout.transformer->block_window(0) == 8192);
  CHECK(scout.transformer->block_window(3) == 0);
}

TEST_CASE("MoE model JSON round-trips and its bad shapes are named") {
  const Model m = model_preset("deepseek-v3");
  const std::string text = model_to_json_text(m);
  const Model back = model_from_json_text(text, "v3.json");
  CHECK(model_to_json_text(back) == text);
  CHECK(parameter_count(back) == parameter_count(m));
  CHECK(back.num_layers() == m.num_layers());

  const std::string shape = R"({"transformer": {"hidden": 64, "layers": 2, "heads": 4, "ffn": 128, "vocab": 100,
      "seq_len": 32, "mlp": "swiglu", "moe": {"experts": 4, "top_k": 6, "expert_ffn": 16}}})";
  CHECK(bad_input([&] { model_from_json_text(shape, "m.json"); }) ==
        "m.json: transformer.moe.top_k is 6, above the 4 experts; give a top_k <= 4");
  CHECK(bad_input([] {
          model_from_json_text(R"({"transformer": {"hidden": 64, "layers": 2, "heads": 4, "ffn": 128, "vocab": 100,
              "seq_len": 32, "moe": {"experts": 4, "top_k": 1, "expert_ffn": 16, "first_dense": 2}}})", "m.json");
        }) == "m.json: transformer.moe: the dense-layer pattern (first 2 dense, every 1) leaves none of the 2 layers MoE; "
              "give fewer dense layers");
  CHECK(bad_input([] {
          model_from_json_text(R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128, "num_local_experts": 4, "num_experts_per_tok": 8,
              "vocab_size": 100, "max_position_embeddings": 64})", "mx.json");
        }) == "mx.json: top_k 8 is not between 1 and the 4 experts; give a top_k <= 4");
  // A model JSON's stated counts must be the shape's.
  CHECK(bad_input([&] {
          model_from_json_text(R"({"active_parameters": 1, "transformer": {"hidden": 64, "layers": 2, "heads": 4,
              "ffn": 128, "vocab": 100, "seq_len": 32}})", "m.json");
        }).starts_with("m.json: active_parameters is 1 but the model's layers hold "));
}
