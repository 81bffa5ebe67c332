#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "../error_text.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/error.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"

using namespace pw;

namespace {

// GPT-2 small's config.json as published (openai-community/gpt2), trimmed of generation settings.
const char* kGpt2 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
  "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257
})";

// Qwen2.5-0.5B: GQA with 2 KV heads, QKV biases, tied embeddings.
const char* kQwen = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "hidden_act": "silu", "hidden_size": 896,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_sliding_window": false, "vocab_size": 151936
})";

// EleutherAI/pythia-160m: GPT-NeoX with biases, rotary positions, untied embeddings.
const char* kPythia = R"({
  "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
  "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05,
  "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 12, "num_hidden_layers": 12,
  "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": false, "use_cache": true,
  "use_parallel_residual": true, "vocab_size": 50304
})";

// mistralai/Mistral-7B-v0.1.
const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "vocab_size": 32000
})";

}  // namespace

TEST_CASE("Llama-3.1-8B's config.json gives the llama3-8b preset") {
  const Model m = load_model(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/llama3-8b.config.json");
  const TransformerConfig& c = *m.transformer;
  const Model preset = model_preset("llama3-8b");
  const TransformerConfig& p = *preset.transformer;
  CHECK(m.name == "llama3-8b");
  CHECK(c.family == "llama");
  CHECK(c.hidden == p.hidden);
  CHECK(c.layers == p.layers);
  CHECK(c.heads == p.heads);
  CHECK(c.kv_heads == p.kv_heads);
  CHECK(c.head_dim == p.head_dim);
  CHECK(c.ffn == p.ffn);
  CHECK(c.vocab == p.vocab);
  // rope_scaling.original_max_position_embeddings (8192), not the stretched 131072.
  CHECK(c.max_seq_len == 8192);
  CHECK(c.mlp == MlpKind::SwiGlu);
  CHECK(c.norm == NormKind::RmsNorm);
  CHECK_FALSE(c.tied_embeddings);
  CHECK_FALSE(c.learned_positions);
  CHECK_FALSE(c.bias);
  CHECK_FALSE(c.qkv_bias);
  CHECK_FALSE(c.dropout);
  CHECK(parameter_count(m) == 8030261248.0);
}

TEST_CASE("GPT-2 reads through the alias table with GPT-2's defaults") {
  const Model m = model_from_json_text(kGpt2, "models/gpt2/config.json");
  CHECK(m.name == "gpt2");  // a snapshot folder names the model
  const TransformerConfig& c = *m.transformer;
  CHECK(c.family == "gpt");
  CHECK(c.hidden == 768);
  CHECK(c.layers == 12);
  CHECK(c.heads == 12);
  CHECK(c.kv_heads == 12);
  CHECK(c.head_dim == 64);
  CHECK(c.ffn == 4 * 768);  // n_inner absent (null): 4 x hidden
  CHECK(c.vocab == 50257);
  CHECK(c.max_seq_len == 1024);
  CHECK(c.mlp == MlpKind::Gelu);
  CHECK(c.norm == NormKind::LayerNorm);
  CHECK(c.tied_embeddings);
  CHECK(c.learned_positions);
  CHECK(c.bias);
  CHECK(c.dropout);
  // 12 L h^2 + 13 L h + V h + n_positions h + 2h (final LayerNorm): the published 124,439,808.
  CHECK(parameter_count(m) == 124439808.0);

  std::string with_inner = kGpt2;
  with_inner.replace(with_inner.find("\"n_ctx\""), 0, "\"n_inner\": 1000, ");
  CHECK(model_from_json_text(with_inner, "g.json").transformer->ffn == 1000);
  std::string null_inner = kGpt2;
  null_inner.replace(null_inner.find("\"n_ctx\""), 0, "\"n_inner\": null, ");
  CHECK(model_from_json_text(null_inner, "g.json").transformer->ffn == 3072);
}

TEST_CASE("Qwen2, GPT-NeoX and Mistral parameter counts match the published ones") {
  const Model q = model_from_json_text(kQwen, "qwen2.5-0.5b.json");
  CHECK(q.name == "qwen2.5-0.5b");
  CHECK(q.transformer->kv_heads == 2);
  CHECK(q.transformer->qkv_bias);
  CHECK_FALSE(q.transformer->bias);
  CHECK(q.transformer->tied_embeddings);
  CHECK(parameter_count(q) == 494032768.0);

  const Model p = model_from_json_text(kPythia, "pythia-160m.config.json");
  CHECK(p.name == "pythia-160m");
  CHECK(p.transformer->mlp == MlpKind::Gelu);
  CHECK(p.transformer->norm == NormKind::LayerNorm);
  CHECK_FALSE(p.transformer->learned_positions);
  CHECK(p.transformer->bias);
  CHECK_FALSE(p.transformer->dropout);
  CHECK(parameter_count(p) == 162322944.0);

  const Model mi = model_from_json_text(kMistral, "mistral.json");
  CHECK(mi.transformer->head_dim == 128);
  // max_position_embeddings 32768 states the context window, not a pretraining length: capped at 8192.
  CHECK(mi.transformer->max_seq_len == kDefaultSeqLenCap);
  CHECK(parameter_count(mi) == 7241732096.0);

  // An explicit head_dim (Mistral-NeMo style: 32 x 128 != 5120) wins over hidden / heads.
  std::string nemo = kMistral;
  nemo.replace(nemo.find("\"hidden_size\": 4096"), 19, "\"hidden_size\": 5120, \"head_dim\": 128");
  CHECK(model_from_json_text(nemo, "nemo.json").transformer->head_dim == 128);
  CHECK(model_from_json_text(nemo, "nemo.json").transformer->hidden == 5120);
}

TEST_CASE("a snapshot folder holding config.json loads as a model named after the folder") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("pw-hf-test-" + std::to_string(::getpid()));
  fs::create_directories(root / "Mistral-7B-v0.1");
  std::ofstream(root / "Mistral-7B-v0.1" / "config.json") << kMistral;
  const Model m = load_model((root / "Mistral-7B-v0.1").string());
  fs::remove_all(root);
  CHECK(m.name == "Mistral-7B-v0.1");
  CHECK(parameter_count(m) == 7241732096.0);
}

TEST_CASE("config.json problems are named") {
  CHECK(bad_input([] { model_from_json_text(R"({"model_type": "bert", "hidden_size": 8})", "c.json"); }) ==
        "c.json: model_type 'bert' is not supported; use a config.json of gpt2, gpt_neox, llama, mistral, qwen2, qwen3, "
        "phi3, nemotron, gemma2, gemma3, mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss or llama4, "
        "or a pipewright model JSON");
  CHECK(bad_input([] { model_from_json_text(R"({"model_type": "gpt2", "n_layer": 2})", "c.json"); }) ==
        "c.json: missing required field 'hidden_size' (or 'n_embd')");
  CHECK(bad_input([] {
          model_from_json_text(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                                   "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 8,
                                   "vocab_size": 10, "max_position_embeddings": 16})",
                               "c.json");
        }) == "c.json: num_key_value_heads (3) must divide num_attention_heads (4)");
  CHECK(bad_input([] {
          model_from_json_text(R"({"model_type": "llama", "hidden_size": -64})", "c.json");
        }) == "c.json: hidden_size must be positive, got -64");
  CHECK(bad_input([] {
          model_from_json_text(R"({"model_type": "llama", "hidden_size": 64.5})", "c.json");
        }) == "c.json: hidden_size must be a whole number, got 64.5");
  CHECK(bad_input([] {
          model_from_json_text(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                                   "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 16})",
                               "c.json");
        }) == "c.json: missing required field 'intermediate_size' (or 'n_inner')");
}

TEST_CASE("the default sequence length is the pretraining length a config states, else at most 8192") {
  // Only the length fields differ from a small llama config.
  const auto seq_of = [](const std::string& extra) {
    const std::string text = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100)" + extra + "}";
    return model_from_json_text(text, "c.json").transformer->max_seq_len;
  };
  // Qwen2.5-72B: 131072 is the extended window; nothing states the pretraining length.
  CHECK(seq_of(R"(, "max_position_embeddings": 131072)") == 8192);
  CHECK(seq_of(R"(, "max_position_embeddings": 4096)") == 4096);
  // Phi-3 (configuration_phi3.py): original_max_position_embeddings at the top.
  CHECK(seq_of(R"(, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096)") == 4096);
  // Llama 3.1's rope_scaling; transformers v5's rope_parameters, whole or per layer type (Gemma 3).
  CHECK(seq_of(R"(, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
      "original_max_position_embeddings": 8192})") == 8192);
  CHECK(seq_of(R"(, "max_position_embeddings": 131072, "rope_parameters": {"rope_type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 32768})") == 32768);
  CHECK(seq_of(R"(, "max_position_embeddings": 131072, "rope_parameters": {"sliding_attention": {"rope_type":
      "default"}, "full_attention": {"rope_type": "linear", "original_max_position_embeddings": 16384}})") == 16384);
  CHECK(bad_input([&] { seq_of(R"(, "max_position_embeddings": 131072, "rope_parameters": {"full_attention":
      {"original_max_position_embeddings": -1}})"); }).find("original_max_position_embeddings") != std::string::npos);
}

TEST_CASE("a model JSON's parameters field, as models --show prints it, must match its shape") {
  const std::string shape = R"("transformer": {"hidden": 64, "layers": 2, "heads": 4, "ffn": 256, "vocab": 100,
      "seq_len": 32})";
  const double counted = parameter_count(model_from_json_text("{" + shape + "}", "m.json"));
  CHECK(parameter_count(model_from_json_text(fmt::format(R"({{"parameters": {:.0f}, {}}})", counted, shape), "m.json")) ==
        counted);
  CHECK(bad_input([&] { model_from_json_text(fmt::format(R"({{"parameters": {:.0f}, {}}})", counted + 1, shape), "m.json"); }) ==
        fmt::format("m.json: parameters is {:.0f} but the model's layers hold {:.0f}; remove the field or fix the shape",
                    counted + 1, counted));
}

TEST_CASE("Qwen3, Phi-3 and Nemotron configs: query-key norms, a sliding window, a squared-ReLU MLP") {
  // Qwen3-8B (configuration_qwen3.py): head_dim 128 given, q_norm and k_norm of 128 each per layer.
  const Model q = model_from_json_text(R"({"model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36,
      "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
      "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": false,
      "attention_bias": false, "use_sliding_window": false, "sliding_window": null})", "qwen3.json");
  const TransformerConfig& qc = *q.transformer;
  CHECK(qc.qk_norm);
  CHECK_FALSE(qc.qkv_bias);
  CHECK(qc.attention_window == 0);
  CHECK(qc.max_seq_len == 8192);
  // Embedding and head 2 x 151936 x 4096, each block 4096 x (4096 + 2 x 1024) + 4096 x 4096 + 3 x 4096 x 12288
  // + two norms (2 x 4096) + q/k norms (2 x 128), the final norm 4096: 8,190,735,360 (Qwen3-8B's card: 8.2B).
  CHECK(parameter_count(q) == 8190735360.0);
  CHECK(bad_input([] {
          model_from_json_text(R"({"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 64,
              "use_sliding_window": true})", "q.json");
        }) == "q.json: use_sliding_window is true; sliding windows on some layers only (max_window_layers) are not "
              "modelled; set it false or describe the model in pipewright's model JSON");

  // Phi-3-mini-4k: gated SiLU MLP (fused gate_up_proj, the same shape), a 2047-token window in every layer,
  // trained at original_max_position_embeddings 4096.
  const Model p = model_from_json_text(R"({"model_type": "phi3", "hidden_size": 3072, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 32064,
      "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "sliding_window": 2047,
      "hidden_act": "silu", "tie_word_embeddings": false})", "phi3.json");
  CHECK(p.transformer->mlp == MlpKind::SwiGlu);
  CHECK(p.transformer->attention_window == 2047);
  CHECK(p.transformer->max_seq_len == 4096);
  // The window halves the attention core: each query attends 2047 keys, not 4096.
  Workload w;
  w.seq_len = 4096;
  Workload full = w;
  Model unwindowed = p;
  unwindowed.transformer->attention_window = 0;
  CHECK(layer_work(p, p.layers[1], w).forward.attention_flops ==
        Approx(layer_work(unwindowed, unwindowed.layers[1], full).forward.attention_flops * 2047 / 4096));

  // Nemotron: squared ReLU, up and down only; LayerNorm1p with weight and bias.
  const Model n = model_from_json_text(R"({"model_type": "nemotron", "hidden_size": 3072, "num_hidden_layers": 32,
      "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 9216,
      "vocab_size": 256000, "max_position_embeddings": 4096, "hidden_act": "relu2", "tie_word_embeddings": false})",
                                       "nemotron.json");
  CHECK(n.transformer->mlp == MlpKind::ReluSquared);
  CHECK(n.transformer->norm == NormKind::LayerNorm);
  CHECK(layer_parameters(*n.transformer, LayerKind::Block, 0, 1).total() ==
        3072.0 * (3072 + 2 * 1024) + 3072.0 * 3072 + 2 * 3072.0 * 9216 + 2 * 2 * 3072.0);
  // What pipewright's own layers do not compute is refused before a run.
  CHECK(model_to_json_text(n).find("\"mlp\": \"relu2\"") != std::string::npos);
  CHECK(parameter_count(model_from_json_text(model_to_json_text(q), "back.json")) == parameter_count(q));
}

TEST_CASE("Gemma 2 and Gemma 3: gated GELU, head_dim 256, sliding layers between global ones") {
  // google/gemma-2-2b-it (configuration_gemma2.py: layer_types default, every second layer global; tied
  // embeddings by default). Parameters: 256000 x 2304 tied, each block 2304 x (2048 + 2 x 1024) + 2048 x 2304
  // + 3 x 2304 x 9216 + 4 norms (Gemma's post-attention and post-feedforward norms besides the two before),
  // the final norm: 2,614,341,888, the card's (and transformers' on the meta device, python/tests).
  const Model g = model_from_json_text(R"({"model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216,
      "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
      "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4096, "vocab_size": 256000,
      "max_position_embeddings": 8192})", "gemma2.json");
  const TransformerConfig& c = *g.transformer;
  CHECK(c.mlp == MlpKind::GeGlu);
  CHECK(c.tied_embeddings);
  CHECK(c.attention_window == 4096);
  CHECK(c.full_attention_every == 2);
  CHECK(c.post_norms);
  CHECK(parameter_count(g) == 2614341888.0);
  CHECK(parameter_count(g) == 256000.0 * 2304 + 26 * (2304.0 * (2048 + 2 * 1024) + 2048.0 * 2304 +
                                                      3.0 * 2304 * 9216 + 4 * 2304) + 2304);
  CHECK(c.block_window(0) == 4096);
  CHECK(c.block_window(1) == 0);
  // At 8192 tokens a sliding block's queries attend 4096 keys, a global one's all 8192.
  Workload w;
  w.seq_len = 8192;
  CHECK(layer_work(g, g.layers[1], w).forward.attention_flops * 2 == layer_work(g, g.layers[2], w).forward.attention_flops);
  // The pattern survives the model JSON.
  const Model back = model_from_json_text(model_to_json_text(g), "back.json");
  CHECK(back.transformer->full_attention_every == 2);
  CHECK(back.transformer->post_norms);
  CHECK(parameter_count(back) == parameter_count(g));

  // Gemma 3 12B: the language model in text_config, five sliding layers to one global (sliding_window_pattern
  // 6), its 131072-token window extended by linear rope scaling: default length 8192.
  const Model g3 = model_from_json_text(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
      "hidden_size": 3840, "intermediate_size": 15360, "num_hidden_layers": 48, "num_attention_heads": 16,
      "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 1024, "sliding_window_pattern": 6,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "max_position_embeddings": 131072,
      "vocab_size": 262208}, "vision_config": {"model_type": "siglip_vision_model"}})", "gemma3.json");
  CHECK(g3.transformer->full_attention_every == 6);
  // Gemma3Attention normalizes each head's queries and keys: 2 x 256 weights a block more than Gemma 2's.
  CHECK(g3.transformer->qk_norm);
  CHECK(g3.transformer->post_norms);
  CHECK(g3.transformer->block_window(4) == 1024);
  CHECK(g3.transformer->block_window(5) == 0);
  CHECK(g3.transformer->max_seq_len == 8192);
  // transformers v5 lists each layer's type instead; a list that is no such pattern is refused.
  std::string types;
  for (int i = 0; i < 6; ++i) types += std::string(i ? ", " : "") + (i % 3 == 2 ? "\"full_attention\"" : "\"sliding_attention\"");
  const Model v5 = model_from_json_text(R"({"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 32,
      "vocab_size": 100, "max_position_embeddings": 128, "layer_types": [)" + types + "]}", "v5.json");
  CHECK(v5.transformer->full_attention_every == 3);
  CHECK(bad_input([] {
          model_from_json_text(R"({"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
              "sliding_window": 32, "vocab_size": 100, "max_position_embeddings": 128,
              "layer_types": ["full_attention", "sliding_attention", "full_attention"]})", "odd.json");
        }) == "odd.json: layer_types is not a repeating pattern of sliding layers and one full-attention layer (layer 1 "
              "breaks it); describe the model in pipewright's model JSON");
}
