// `pipewright models --show`: the model JSON form with the parameter count a user checks it by, and that
// output read back as a model.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fstream>

#include "cli_test_util.hpp"
#include "core/model.hpp"

using namespace pw;

TEST_CASE("models --show prints the parameter count after the name, and the output loads back") {
  const CliResult shown = run_cli({"models", "--show", "llama3-8b"});
  REQUIRE(shown.code == 0);
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(shown.out);
  CHECK(j.begin().key() == "name");
  CHECK(std::next(j.begin()).key() == "parameters");
  // Llama 3 8B: 8,030,261,248 parameters (Meta's model card rounds to 8.0B).
  CHECK(j.at("parameters").get<std::int64_t>() == 8030261248);
  const Model back = model_from_json_text(shown.out, "shown.json");
  CHECK(parameter_count(back) == 8030261248.0);
}
