// Loader inputs an adversary would write (issue 12): deep nesting, numbers beyond a double, huge
// values to echo, denormal and enormous figures, counts that would make the work explode.
#include <catch2/catch.hpp>

#include <string>

#include "../error_text.hpp"
#include "core/cluster.hpp"
#include "core/excerpt.hpp"
#include "core/json_text.hpp"
#include "core/model.hpp"

using namespace pw;

namespace {

std::string cluster_with_gpu(const std::string& gpu) {
  return R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "gpu": )" + gpu +
         R"(, "intra_node": {"bandwidth_bytes_per_s": 450e9, "latency_s": 1e-6},
              "inter_node": {"bandwidth_bytes_per_s": 25e9, "latency_s": 5e-6}})";
}

std::string gpu(const std::string& peak_tflops, const std::string& memory = "80e9") {
  return R"({"name": "g", "peak_tflops": )" + peak_tflops + R"(, "memory_bytes": )" + memory +
         R"(, "hbm_bytes_per_s": 2e12})";
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("hostile json: 200 KB of nested arrays is refused while parsing, naming where") {
  // The error path used to serialise the whole value: a stack overflow.
  const std::string deep = R"({"name": )" + nested(100'000) + "}";
  CHECK(bad_input([&] { cluster_from_json_text(deep, "c.json"); }) ==
        "c.json: values nest deeper than 64 arrays and objects at name[0][0][0][0][0][0][0][0][0][0][0][0]... (193 "
        "bytes); pipewright's files nest a few levels");
  CHECK(bad_input([&] { cluster_from_json_text(cluster_with_gpu(nested(100'000)), "c.json"); })
            .starts_with("c.json: values nest deeper than 64 arrays and objects at gpu[0]"));
  CHECK(bad_input([&] { parse_json_text(nested(65), "t.json"); }).starts_with("t.json: values nest deeper than 64"));
  CHECK(parse_json_text(nested(64), "t.json").is_array());
}

TEST_CASE("hostile json: a number beyond a double is bad input naming the file and the field") {
  CHECK(bad_input([] { model_from_json_text(R"({"layers": [{"forward_s": 1}, {"forward_s": 1e400}]})", "m.json"); }) ==
        "m.json: layers[1].forward_s is 1e400, beyond the range of a double (1.8e308); give a figure in the field's "
        "range");
  CHECK(bad_input([] { cluster_from_json_text(cluster_with_gpu(gpu("-1e400")), "c.json"); }) ==
        "c.json: gpu.peak_tflops is -1e400, beyond the range of a double (1.8e308); give a figure in the field's range");
  CHECK(bad_input([] { parse_json_text("[1, 2, 1" + std::string(400, '0') + "]", "t.json"); }) ==
        "t.json: [2] is 1000000000000000000000000000000000000000... (401 bytes), beyond the range of a double "
        "(1.8e308); give a figure in the field's range");
}

TEST_CASE("hostile json: messages quote a short excerpt of a large value") {
  const std::string two_mb(2'000'000, 'a');
  CHECK(bad_input([&] { cluster_from_json_text(R"({"name": [")" + two_mb + R"("]})", "c.json"); }) ==
        "c.json: name must be a string, got [\"" + std::string(38, 'a') + "... (2000004 bytes)");
  CHECK(bad_input([&] { cluster_from_json_text(R"({"name": ")" + two_mb, "c.json"); })
            .ends_with("last read: '\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (2000001 bytes)'"));
  CHECK(bad_input([&] { model_from_json_text(R"({"model_type": ")" + two_mb + "\\n\"}", "c.json"); }) ==
        "c.json: model_type is aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (2000001 bytes), longer than 4096 bytes; "
        "give a shorter string");
  CHECK(bad_input([&] { model_from_json_text(R"({"model_type": ")" + std::string(4000, 'b') + "\"}", "c.json"); }) ==
        "c.json: model_type 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb... (4000 bytes)' is not supported; use a "
        "config.json of gpt2, gpt_neox, llama, mistral, qwen2, qwen3, phi3, nemotron, gemma2, gemma3, mixtral, "
        "qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss or llama4, or a pipewright model JSON");
  CHECK(excerpt("two\nlines\x01") == "two\\nlines\\x01");
}

TEST_CASE("hostile json: denormal and enormous figures are refused where they would overflow") {
  // A denormal peak made every layer cost infinite: "split_layers: layer cost inf".
  CHECK(bad_input([] { cluster_from_json_text(cluster_with_gpu(gpu("1e-310")), "c.json"); }) ==
        "c.json: gpu.peak_tflops is 1e-310, below the smallest normal double; give 0 or at least 2.3e-308");
  CHECK(bad_input([] { cluster_from_json_text(cluster_with_gpu(gpu("1e-9")), "c.json"); }) ==
        "c.json: gpu.peak_tflops is 1e-09 TFLOP/s; give a figure from 1e-06 to 1000000 TFLOP/s");
  CHECK(bad_input([] { cluster_from_json_text(cluster_with_gpu(gpu("100", "1e300")), "c.json"); }) ==
        "c.json: gpu.memory_bytes is 1e+300 B; give a figure from 0 to 1e+18 B (or \"inf\")");
  // activation_bytes 1e308 printed "peak_memory_bytes": null with exit 0.
  CHECK(bad_input([] { model_from_json_text(R"({"layers": [{"forward_s": 1, "activation_bytes": 1e308}]})", "m.json"); }) ==
        "m.json: layers[0].activation_bytes is 1e+308 B; give a figure from 0 to 1e+18 B");
  // A layer cost above 1e154 made the split read out of bounds.
  CHECK(bad_input([] { model_from_json_text(R"({"layers": [{"forward_s": 1e155}]})", "m.json"); }) ==
        "m.json: layers[0].forward_s is 1e+155 s; give a figure from 0 to 1000000 s");
}

TEST_CASE("hostile json: layer counts above the cap are refused before the layers are made") {
  // A 195-byte file of 10^6 layers took the layer split over 400 s.
  CHECK(bad_input([] {
          model_from_json_text(R"({"transformer": {"hidden": 64, "layers": 1000000, "heads": 4, "ffn": 256,
                                   "vocab": 100, "seq_len": 32}})",
                               "m.json");
        }) == "m.json: transformer.layers is 1000000 layers, above the cap of 100000; give at most 100000");
  CHECK(bad_input([] {
          model_from_json_text(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 100001,
                                   "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 100,
                                   "max_position_embeddings": 32})",
                               "config.json");
        }) == "config.json: num_hidden_layers is 100001 layers, above the cap of 100000; give at most 100000");
  std::string layers = R"({"layers": [)";
  for (int i = 0; i <= 100'000; ++i) layers += std::string(i ? "," : "") + "{\"forward_s\": 1}";
  CHECK(bad_input([&] { model_from_json_text(layers + "]}", "m.json"); }) ==
        "m.json: layers has 100001 layers, above the cap of 100000; give at most 100000");
}
