// `pipewright profile`: the table, the profile file, bad input.
#include <catch2/catch.hpp>

#include <fstream>

#include "cli_test_util.hpp"
#include "profiler/profile.hpp"

TEST_CASE("profile prints the layer table and the link, and writes a profile that reads back") {
  const std::string path = std::string(PIPEWRIGHT_TEST_TMP) + "/tiny-gpt-profile.json";
  std::remove(path.c_str());
  const CliResult r = run_cli({"profile", "--model", source_path("examples/tiny-gpt.json"), "--micro-batch-size", "1",
                               "2", "--min-time", "0", "--link-repetitions", "1", "--out", path});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("tiny-gpt on ") == 0);
  CHECK(r.out.find("  layer        b     s") != std::string::npos);
  CHECK(r.out.find("  fit: latency ") != std::string::npos);
  CHECK(r.out.find("wrote " + path) != std::string::npos);
  const pw::Profile p = pw::load_profile(path);
  CHECK(p.machine.backend == "cpu");
  CHECK(p.layers.size() == 6);  // embedding, block, head at b = 1 and 2
  CHECK(p.layers[3].micro_batch_size == 2);
  CHECK(p.layers[3].seq_len == 32);
  REQUIRE(p.links.size() == 1);
  CHECK(p.links[0].samples.size() == 9);  // 1 KiB to 64 MiB in steps of 4
  CHECK(p.optimizer_s_per_parameter > 0);
}

TEST_CASE("profile: bad input exits 2 with one line") {
  const CliResult backend = run_cli({"profile", "--model", source_path("examples/tiny-gpt.json"), "--backend", "tpu"});
  CHECK(backend.code == 2);
  CHECK(backend.err == "error: --backend: unknown backend 'tpu'; use cpu or cuda\n");
  const CliResult explicit_model = run_cli({"profile", "--model", source_path("examples/tiny-uniform.json")});
  CHECK(explicit_model.code == 2);
  CHECK(explicit_model.err ==
        "error: --model: 'tiny-uniform' gives explicit per-layer costs and has no layers to compute; use a transformer "
        "model (e.g. examples/tiny-llama.json) or --compute sleep\n");
}
