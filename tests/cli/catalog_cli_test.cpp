// `pipewright models --show`: the model JSON form with the parameter count a user checks it by, and that
// output read back as a model.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "cli_test_util.hpp"
#include "core/model.hpp"
#include "profiler/profile.hpp"
#include "profiler/profiled_model.hpp"

using namespace pw;

TEST_CASE("models --show prints the total and active parameter counts after the name, and the output loads back") {
  const CliResult shown = run_cli({"models", "--show", "llama3-8b"});
  REQUIRE(shown.code == 0);
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(shown.out);
  CHECK(j.begin().key() == "name");
  CHECK(std::next(j.begin()).key() == "total_parameters");
  // Llama 3 8B: 8,030,261,248 parameters (Meta's model card rounds to 8.0B), all of them active.
  CHECK(j.at("total_parameters").get<std::int64_t>() == 8030261248);
  CHECK(j.at("active_parameters").get<std::int64_t>() == 8030261248);
  const Model back = model_from_json_text(shown.out, "shown.json");
  CHECK(parameter_count(back) == 8030261248.0);
}

TEST_CASE("models --show --profile-keys prints what a profile of the model is keyed by, layer by layer") {
  // Qwen3-30B-A3B: every block routes to experts, so each is keyed as an MoE block with the experts' figures.
  const CliResult shown = run_cli({"models", "--show", "qwen3-30b-a3b", "--profile-keys"});
  REQUIRE(shown.code == 0);
  const nlohmann::json j = nlohmann::json::parse(shown.out);
  const Model m = model_preset("qwen3-30b-a3b");
  CHECK(j.at("model") == nlohmann::json(profiled_model_json(*profiled_model_of(m))));
  const nlohmann::json& layers = j.at("layers");
  REQUIRE(layers.size() == m.layers.size());
  CHECK(layers.front() == nlohmann::json{{"name", "embedding"}, {"kind", "embedding"},
                                         {"shape", "hidden=2048 vocab=151936 positions=rotary"}});
  CHECK(layers[1].at("kind") == "moe-block");
  CHECK(layers[1].at("shape") == layer_shape(*m.transformer, m.layers[1]));
  CHECK(layers.back().at("kind") == "head");
  // A model of explicit costs has no shapes; the flag needs --show.
  const CliResult explicit_costs =
      run_cli({"models", "--show", source_path("examples/tiny-uniform.json"), "--profile-keys"});
  CHECK(explicit_costs.code == 2);
  CHECK(explicit_costs.err.find("--profile-keys: '") == 7);
  const CliResult alone = run_cli({"models", "--profile-keys"});
  CHECK(alone.code == 2);
  CHECK(alone.err == "error: --profile-keys requires --show\n");
}

TEST_CASE("clusters lists each preset's dense bf16 and fp8 peaks, the columns as wide as their cells") {
  const CliResult r = run_cli({"clusters"});
  REQUIRE(r.code == 0);
  std::istringstream lines(r.out);
  std::string header, line;
  std::getline(lines, header);
  CHECK(header.rfind("cluster        GPU                    GPUs/node    memory  peak bf16   peak fp8", 0) == 0);
  bool a100 = false, h100 = false, gb200 = false;
  while (std::getline(lines, line)) {
    CHECK(line.size() <= header.size());
    if (line.rfind("dgx-a100-80gb ", 0) == 0) a100 = line.find("312 TF/s          -") != std::string::npos;
    if (line.rfind("dgx-h100 ", 0) == 0) h100 = line.find("989 TF/s  1979 TF/s") != std::string::npos;
    if (line.rfind("gb200-nvl72 ", 0) == 0) gb200 = line.find("B200 (GB200) 186GB            72") != std::string::npos;
  }
  CHECK(a100);  // no fp8 tensor cores
  CHECK(h100);
  CHECK(gb200);
}
