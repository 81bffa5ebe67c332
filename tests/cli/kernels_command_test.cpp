// `pipewright kernels`: show and query a folder of tables, import AIConfigurator's (through Python), and
// the refusals, with the exact lines a user reads.
#include <catch2/catch.hpp>

#include <filesystem>

#include "cli/python_module.hpp"
#include "cli_test_util.hpp"

namespace {

const std::string kTables = source_path("tests/fixtures/kernels/h200_sxm-vllm");

}  // namespace

TEST_CASE("kernels show lists a folder's source, versions and tables", "[cli][kernels]") {
  const CliResult r = run_cli({"kernels", "show", kTables});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out == kTables + ": h200_sxm vllm, from AIConfigurator (aiconfigurator-core 0.12.0)\n"
                           "versions: attention 0.24.0, gemm 0.24.0, nccl 2.29.2\n"
                           "\n"
                           "  kind                        rows  from\n"
                           "  context_attention_perf        24  h200_sxm/attention/vllm/0.24.0/context_attention_perf.parquet\n"
                           "  gemm_perf                     36  h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet\n"
                           "  nccl_perf                    126  h200_sxm/comm/nccl/2.29.2/nccl_perf.parquet\n"
                           "  all                          186\n");
}

TEST_CASE("kernels query reads a shape's time and says how", "[cli][kernels]") {
  CHECK(run_cli({"kernels", "query", kTables, "--gemm", "4096", "12288", "4096"}).out ==
        "gemm m 4096, n 12288, k 4096 bf16: 525 us (measured)\n  785 TFLOP/s at that time\n");
  CHECK(run_cli({"kernels", "query", kTables, "--gemm", "2048", "12288", "4096"}).out ==
        "gemm m 2048, n 12288, k 4096 bf16: 272 us (interpolated)\n  759 TFLOP/s at that time\n");
  CHECK(run_cli({"kernels", "query", kTables, "--collective", "all-reduce", "--bytes", "536870912", "--gpus", "8"}).out ==
        "all-reduce of 537 MB over 8 GPUs (bf16): 2.040 ms (measured)\n");
  CHECK(run_cli({"kernels", "query", kTables, "--attention", "1", "8192", "64", "8", "128"}).out ==
        "prefill attention, batch 1 x 8192 tokens, 64 heads (8 kv) of 128: 1.817 ms (measured)\n");
  const CliResult far = run_cli({"kernels", "query", kTables, "--gemm", "100000", "12288", "4096"});
  CHECK(far.code == 0);
  CHECK(far.out ==
        "gemm m 100000, n 12288, k 4096 bf16: no time: gemm_perf (gemm_dtype=bfloat16, "
        "kernel_source=torch.nn.functional.linear): m 100000 is past the largest measured, 4096, by more than 2x\n");
}

TEST_CASE("kernels query refuses what it cannot ask, in one line", "[cli][kernels]") {
  const auto err = [](std::vector<std::string> args) {
    const CliResult r = run_cli(std::move(args));
    CHECK(r.code == 2);
    return r.err;
  };
  CHECK(err({"kernels", "query", kTables, "--gemm", "0", "1", "1"}) == "error: --gemm: 0 is not a dimension from 1 to 1e9\n");
  CHECK(err({"kernels", "query", kTables}) ==
        "error: kernels query: give one of --gemm M N K, --collective OP, --attention B S H KV D\n");
  CHECK(err({"kernels", "query", kTables, "--collective", "all-sum", "--bytes", "1", "--gpus", "2"}) ==
        "error: --collective: 'all-sum' is not one of all-reduce, all-gather, reduce-scatter, all-to-all\n");
  CHECK(err({"kernels", "query", kTables, "--collective", "all-reduce", "--bytes", "1e9", "--gpus", "1"}) ==
        "error: --gpus: give the GPUs of the collective, 2 or more\n");
  CHECK(err({"kernels", "query", kTables, "--gemm", "1", "1", "1", "--precision", "fp4"}) ==
        "error: --precision: unknown 'fp4'; use bf16 or fp8\n");
}

TEST_CASE("kernels import aiconfigurator refuses through its Python side in one line", "[cli][kernels]") {
  const CliResult missing = run_cli({"kernels", "import", "aiconfigurator", "--data", "/nonexistent", "--system", "x",
                                     "--backend", "y", "--out", tmp("kernels-never")});
  CHECK(missing.code == 2);
  CHECK(missing.err == "error: --data: no folder '/nonexistent'\n");
  CHECK(!std::filesystem::exists(tmp("kernels-never")));
}

TEST_CASE("kernels import aiconfigurator writes what kernels query reads back", "[cli][kernels]") {
  if (pw::python_interpreter().find("/.venv/") == std::string::npos) {
    WARN("skipped: no .venv with pyarrow and aiconfigurator-core (scripts/install-deps.sh makes it)");
    return;
  }
  const std::string out = tmp("kernels-h200-vllm");
  std::filesystem::remove_all(out);
  const CliResult r = run_cli({"kernels", "import", "aiconfigurator", "--system", "h200_sxm", "--backend", "vllm",
                               "--version", "0.24.0", "--out", out});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out ==
        "25 tables, 360636 rows, from h200_sxm vllm (attention 0.24.0, comm 0.24.0, encoder_attention 0.24.0, "
        "gemm 0.24.0, linear_attention 0.24.0, mhc 0.24.0, mla 0.24.0, mla_bmm 0.24.0, moe 0.24.0, msa 0.24.0, "
        "nccl 2.29.2, quantize 0.24.0, sparse_attention 0.24.0)\n");
  // The same row as the fixture cut from it.
  CHECK(run_cli({"kernels", "query", out, "--gemm", "4096", "12288", "4096"}).out ==
        "gemm m 4096, n 12288, k 4096 bf16: 525 us (measured)\n  785 TFLOP/s at that time\n");
  // A second import to the same folder is refused, and the first is kept.
  const CliResult again = run_cli({"kernels", "import", "aiconfigurator", "--system", "h200_sxm", "--backend", "vllm",
                                   "--out", out});
  CHECK(again.code == 2);
  CHECK(again.err == "error: --out: '" + out + "' exists; give a new folder (nothing is overwritten)\n");
  CHECK(std::filesystem::exists(out + "/gemm_perf.json"));
  std::filesystem::remove_all(out);
}

TEST_CASE("simulate --kernels prices the GEMMs the tables answer, and says how much", "[cli][kernels]") {
  const std::vector<std::string> args{"simulate", "--model",             "llama3-8b", "--cluster", "hgx-h200",
                                      "--tp",     "4",                   "--pp",      "2",         "--seq-len",
                                      "4096",     "--global-batch-size", "8"};
  const CliResult plain = run_cli(args);
  const CliResult tables = run_cli(with(args, {"--kernels", kTables}));
  REQUIRE(plain.code == 0);
  REQUIRE(tables.code == 0);
  CHECK(plain.out.find("step time               524.3 ms") != std::string::npos);
  CHECK(tables.out.find("step time               483.2 ms") != std::string::npos);
  CHECK(tables.out.find("\ncost model: analytic <- kernel tables (" + kTables +
                        ": h200_sxm vllm, AIConfigurator (aiconfigurator-core 0.12.0))\n"
                        "  51.7% of the layers' compute time from the kernel tables (12 distinct GEMM shapes: 2 "
                        "measured, 8 interpolated, 0 extrapolated, 2 not in the tables), the rest from the model below\n"
                        "  the first shape not in the tables (its phase from the model below): bf16 GEMM m 4096, n 32064, k "
                        "4096 in head: gemm_perf (gemm_dtype=bfloat16, kernel_source=torch.nn.functional.linear): n 32064 is "
                        "past the largest measured, 12288, by more than 2x\n") != std::string::npos);
  // On another GPU the tables price nothing, and the report says so.
  std::vector<std::string> h100 = with(args, {"--kernels", kTables});
  h100[4] = "dgx-h100";
  const CliResult other = run_cli(h100);
  CHECK(other.out.find("  100.0% of it on GPUs other than the tables' h200_sxm: from the model below\n") !=
        std::string::npos);
  const CliResult missing = run_cli(with(args, {"--kernels", tmp("no-such-tables")}));
  CHECK(missing.code == 2);
  CHECK(missing.err == "error: --kernels: kernel tables manifest file '" + tmp("no-such-tables") + "' not found\n");
}

TEST_CASE("plan --kernels searches with the tables and reports what they priced", "[cli][kernels]") {
  const CliResult r = run_cli({"plan", "--model", "llama3-8b", "--cluster", "hgx-h200", "--gpus", "8", "--seq-len",
                               "4096", "--global-batch-size", "16", "--kernels", kTables, "--top", "1"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\ncost model: analytic <- kernel tables (" + kTables) != std::string::npos);
  CHECK(r.out.find("  while searching: ") != std::string::npos);
  CHECK(r.out.find("% of the layers' compute time from the kernel tables (") != std::string::npos);
}
