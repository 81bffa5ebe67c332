// A `run --dp N --json` record as calibrate reads it: one row per replica's rank, replica 0's ranks the
// pipeline the fits see.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "../cli/cli_test_util.hpp"
#include "calibrate/run_record.hpp"

TEST_CASE("calibrate reads a run of data-parallel replicas through replica 0's ranks") {
  const CliResult r = run_cli({"run", "--model", source_path("examples/tiny-llama.json"), "--cluster", "ideal", "--pp", "2",
                               "--dp", "2", "--microbatches", "4", "--compute", "sleep", "--iterations", "1", "--warmup",
                               "0", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["ranks"].size() == 4);
  const pw::RunRecord record = pw::run_from_json_text(r.out, "run.json");
  REQUIRE(record.busy_s.size() == 2);
  CHECK(record.busy_s[0] == j["ranks"][0]["busy_s"].get<double>());
  CHECK(record.busy_s[1] == j["ranks"][1]["busy_s"].get<double>());
  CHECK(record.scenario.parallel.dp == 2);
}
