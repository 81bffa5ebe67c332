// `pipewright profile`: the table, the profile file, bad input.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "cli_test_util.hpp"
#include "kernels/kernel_table.hpp"
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

TEST_CASE("profile --kernels-out writes the model's GEMMs as kernel tables, and never over a folder") {
  const std::string dir = std::string(PIPEWRIGHT_TEST_TMP) + "/tiny-gpt-kernels";
  std::filesystem::remove_all(dir);
  const std::vector<std::string> args{"profile",    "--model", source_path("examples/tiny-gpt.json"),
                                      "--min-time", "0",       "--link-repetitions",
                                      "1",          "--kernels-out", dir};
  const CliResult r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\nwrote " + dir + " (9 GEMM shapes of tiny-gpt, float32 on this CPU)\n") != std::string::npos);
  const auto tables = pw::KernelTables::open(dir);
  CHECK(tables->system() == "cpu");
  CHECK(tables->source() == "pipewright profile --kernels-out");
  const pw::KernelTable* gemms = tables->table("gemm_perf");
  REQUIRE(gemms);
  CHECK(gemms->rows() == 9);
  CHECK(gemms->text(gemms->key_index("gemm_dtype"), 0) == "float32");
  // Against itself every shape compares at 1.
  CHECK(run_cli({"kernels", "compare", dir, dir}).out.find("  gemm_perf  gemm_dtype=float32          9         1.000") !=
        std::string::npos);
  const CliResult again = run_cli(args);
  CHECK(again.code == 2);
  CHECK(again.err == "error: --kernels-out: '" + dir + "' exists; give a new folder (nothing is overwritten)\n");
  CHECK(pw::KernelTables::open(dir)->table("gemm_perf")->rows() == 9);
}
