// `pipewright kernels`: show and query a folder of tables, import AIConfigurator's (through Python), and
// the refusals, with the exact lines a user reads.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include "cli/python_module.hpp"
#include "kernels/kernel_table.hpp"
#include "cli_test_util.hpp"

namespace {

const std::string kTables = source_path("tests/fixtures/kernels/h200_sxm-vllm");
const std::string kDeepEp = source_path("tests/fixtures/kernels/h200_sxm-sglang-deepep");

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
        "gemm m 100000, n 12288, k 4096 bf16: 12.84 ms (extrapolated): m 100000 read as 25 slices of 4000\n"
        "  784 TFLOP/s at that time\n");
  // The GQA group (query heads a kv head) is selected, the heads read between counts measured at it.
  CHECK(run_cli({"kernels", "query", kTables, "--attention", "1", "8192", "48", "6", "128"}).out ==
        "prefill attention, batch 1 x 8192 tokens, 48 heads (6 kv) of 128: 1.817 ms (extrapolated): num_heads 48 "
        "below the smallest measured, 64: that point's time\n");
  CHECK(run_cli({"kernels", "query", kTables, "--attention", "1", "8192", "64", "3", "128"}).out ==
        "prefill attention, batch 1 x 8192 tokens, 64 heads (3 kv) of 128: no time: context_attention_perf "
        "(attn_dtype=bfloat16, kv_cache_dtype=bfloat16, head_dim=128, window_size=0, beam_width=1, "
        "num_heads/num_key_value_heads=21.3333): no measured rows\n");
}

TEST_CASE("kernels query --deepep reads DeepEP's dispatch and combine at a token count and node count", "[cli][kernels]") {
  const CliResult r = run_cli({"kernels", "query", kDeepEp, "--deepep", "2048", "2", "7168", "8", "256"});
  CHECK(r.code == 0);
  CHECK(r.out ==
        "DeepEP normal dispatch of 2048 tokens a rank over 2 nodes (hidden 7168, top 8 of 256 experts, 20 SMs): 499 us "
        "(measured)\n"
        "DeepEP normal combine of 2048 tokens a rank over 2 nodes (hidden 7168, top 8 of 256 experts, 20 SMs): 1.185 ms "
        "(measured)\n");
  const CliResult ll = run_cli({"kernels", "query", kDeepEp, "--deepep", "64", "2", "7168", "8", "256", "--low-latency"});
  CHECK(ll.out.find("DeepEP low-latency dispatch of 64 tokens a rank over 2 nodes (hidden 7168, top 8 of 256 experts): "
                    "no time: no wideep_deepep_ll_perf table\n") == 0);
  check_bad_input({"kernels", "query", kDeepEp, "--deepep", "2048", "2.5", "7168", "8", "256"},
                  "--deepep: 2.5 is not a whole count from 1 to 2^20 (nodes, hidden size, top k, experts)");
}

TEST_CASE("kernels query refuses what it cannot ask, in one line", "[cli][kernels]") {
  const auto err = [](std::vector<std::string> args) {
    const CliResult r = run_cli(std::move(args));
    CHECK(r.code == 2);
    return r.err;
  };
  CHECK(err({"kernels", "query", kTables, "--gemm", "0", "1", "1"}) == "error: --gemm: 0 is not a dimension from 1 to 1e9\n");
  CHECK(err({"kernels", "query", kTables}) ==
        "error: kernels query: give one of --gemm M N K, --collective OP, --attention B S H KV D, --deepep T N H K E\n");
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

TEST_CASE("simulate --kernels prices the GEMMs, attention and collectives the tables answer, and says how much", "[cli][kernels]") {
  const std::vector<std::string> args{"simulate", "--model",             "llama3-8b", "--cluster", "hgx-h200",
                                      "--tp",     "4",                   "--pp",      "2",         "--seq-len",
                                      "4096",     "--global-batch-size", "8"};
  const CliResult plain = run_cli(args);
  const CliResult tables = run_cli(with(args, {"--kernels", kTables}));
  REQUIRE(plain.code == 0);
  REQUIRE(tables.code == 0);
  CHECK(plain.out.find("step time               524.3 ms") != std::string::npos);
  CHECK(tables.out.find("step time               480.2 ms") != std::string::npos);
  CHECK(tables.out.find("\ncost model: analytic <- kernel tables (" + kTables +
                        ": h200_sxm vllm, AIConfigurator (aiconfigurator-core 0.12.0))\n"
                        "  56.0% of the layers' time from the kernel tables (GEMMs 55.8%, attention 0.0%, tp collectives "
                        "0.2%), the rest from the model below\n"
                        "  distinct shapes asked: GEMM 12 (2 measured, 8 interpolated, 2 extrapolated, 0 not in the "
                        "tables), attention 1 (0 measured, 0 interpolated, 0 extrapolated, 1 not in the tables), tp "
                        "collective 3 (2 measured, 0 interpolated, 0 extrapolated, 1 not in the tables)\n"
                        "  the first shape not in the tables (its part from the model below): reduce_scatter of 33.6 MB "
                        "over 4 GPUs in embedding: nccl_perf (op_name=reduce_scatter, nccl_dtype=half): no measured "
                        "rows\n") != std::string::npos);
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

TEST_CASE("simulate --kernels A,B: DeepEP's all-to-alls from one folder over another's GEMMs, each reported", "[cli][kernels]") {
  // DeepSeek-V3 with ep 16 over two H200 nodes (Megatron-Core's order keeps the group in them), the flex dispatcher.
  const std::vector<std::string> args{"simulate", "--model", "deepseek-v3", "--cluster", "hgx-h200", "--pp", "16",
                                      "--ep", "16", "--dp", "16", "--rank-order", "tp-dp-pp", "--dispatcher", "flex",
                                      "--precision", "fp8", "--global-batch-size", "64", "--seq-len", "4096",
                                      "--recompute", "full"};
  const CliResult plain = run_cli(args);
  const CliResult both = run_cli(with(args, {"--kernels", kTables + "," + kDeepEp}));
  INFO(both.err);
  REQUIRE((plain.code == 0 && both.code == 0));
  CHECK(plain.out.find("  expert all-to-all       148.8 ms on the busiest rank") != std::string::npos);
  CHECK(both.out.find("  expert all-to-all       146.1 ms on the busiest rank") != std::string::npos);
  CHECK(both.out.find("cost model: analytic <- kernel tables (" + kTables + ": h200_sxm vllm, AIConfigurator "
                      "(aiconfigurator-core 0.12.0)) <- kernel tables (" + kDeepEp + ": h200_sxm sglang, "
                      "AIConfigurator (aiconfigurator_core 0.12.0))\n  " + kTables + " (h200_sxm vllm):\n") !=
        std::string::npos);
  // The GEMM folder does not say it lacks the DeepEP table the folder over it holds.
  CHECK(both.out.find("the tables hold no wideep_deepep_normal_perf") == std::string::npos);
  CHECK(both.out.find("\n  " + kDeepEp + " (h200_sxm sglang):\n    27.6% of the layers' time from the kernel tables "
                      "(GEMMs 0.0%, attention 0.0%, tp collectives 0.0%, expert all-to-alls 27.6%), the rest from the "
                      "model below\n") != std::string::npos);
  CHECK(both.out.find("expert all-to-all 2 (2 measured, 0 interpolated, 0 extrapolated, 0 not in the tables)") !=
        std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(run_cli(with(args, {"--kernels", kTables + "," + kDeepEp, "--json"})).out);
  const nlohmann::json& folders = j.at("cost_model").at("kernel_tables").at("folders");
  REQUIRE(folders.size() == 2);
  CHECK(folders[0].at("folder") == kTables);
  CHECK(folders[1].at("shapes").at("all_to_alls").at("measured") == 2);
  CHECK(folders[1].at("all_to_all_s").get<double>() > 0);
  check_bad_input(with(args, {"--kernels", kTables + ",," + kDeepEp}),
                  "--kernels: '" + kTables + ",," + kDeepEp + "' has an empty folder name; give folders separated by commas");
}

TEST_CASE("plan --kernels searches with the tables and reports what they priced", "[cli][kernels]") {
  const CliResult r = run_cli({"plan", "--model", "llama3-8b", "--cluster", "hgx-h200", "--gpus", "8", "--seq-len",
                               "4096", "--global-batch-size", "16", "--kernels", kTables, "--top", "1"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\ncost model: analytic <- kernel tables (" + kTables) != std::string::npos);
  CHECK(r.out.find("  while searching: ") != std::string::npos);
  CHECK(r.out.find("% of the layers' time from the kernel tables (GEMMs ") != std::string::npos);
}

TEST_CASE("kernels coverage lists what a run would ask of the tables that they lack", "[cli][kernels]") {
  const CliResult r = run_cli({"kernels", "coverage", kTables, "--model", "llama3-8b", "--cluster", "hgx-h200", "--tp", "4",
                               "--pp", "2", "--seq-len", "4096", "--global-batch-size", "8"});
  REQUIRE(r.code == 0);
  CHECK(r.out ==
        "llama3-8b on 8 x H200 SXM 141GB, tp 4 pp 2 dp 1, micro-batch 1 x 4096 tokens, with " + kTables +
            " (h200_sxm vllm)\n"
            "  56.0% of the layers' time from the kernel tables (GEMMs 55.8%, attention 0.0%, tp collectives 0.2%), the "
            "rest from the model below\n"
            "  distinct shapes asked: GEMM 12 (2 measured, 8 interpolated, 2 extrapolated, 0 not in the tables), "
            "attention 1 (0 measured, 0 interpolated, 0 extrapolated, 1 not in the tables), tp collective 3 (2 "
            "measured, 0 interpolated, 0 extrapolated, 1 not in the tables)\n"
            "  not in the tables (2), each priced by the model below:\n"
            "    reduce_scatter of 33.6 MB over 4 GPUs in embedding: nccl_perf (op_name=reduce_scatter, "
            "nccl_dtype=half): no measured rows\n"
            "    attention forward batch 1, sequence 4096, heads 8, kv heads 2, head dim 128 in block0: "
            "context_attention_perf (attn_dtype=bfloat16, kv_cache_dtype=bfloat16, head_dim=128, window_size=0, "
            "beam_width=1, num_heads/num_key_value_heads=4): num_heads 8 is below the smallest measured, 32, by more "
            "than 2x\n"
            "  never asked of the tables: memory-bound work, the attention backward, MLA's, a sliding window's and "
            "context parallelism's attention, collectives across nodes, expert all-to-alls and the routed experts' "
            "grouped GEMMs\n");
  // Its options are simulate's, refused as simulate refuses them.
  const CliResult bad = run_cli({"kernels", "coverage", kTables, "--model", "llama3-8b", "--cluster", "hgx-h200"});
  CHECK(bad.code == 2);
  CHECK(bad.err == "error: give --microbatches (per pipeline) or --global-batch-size (sequences per iteration)\n");
  const CliResult none = run_cli({"kernels", "coverage", tmp("no-tables"), "--model", "llama3-8b", "--cluster", "hgx-h200",
                                  "--global-batch-size", "8"});
  CHECK(none.code == 2);
  CHECK(none.err == "error: --kernels: kernel tables manifest file '" + tmp("no-tables") + "' not found\n");
}

TEST_CASE("serve simulate and serve plan --kernels price from the tables and say how much", "[cli][kernels]") {
  const std::vector<std::string> args{"serve", "simulate", "--model", "llama3-8b", "--cluster", "hgx-h200",
                                      "--prompt-tokens", "512", "--output-tokens", "64", "--concurrency", "4",
                                      "--requests", "16"};
  const CliResult plain = run_cli(args);
  const CliResult tables = run_cli(with(args, {"--kernels", kTables}));
  REQUIRE(plain.code == 0);
  REQUIRE(tables.code == 0);
  CHECK(plain.out.find("cost model:") == std::string::npos);
  CHECK(plain.out.find("  output tokens/s     604.4\n") != std::string::npos);
  CHECK(tables.out.find("  output tokens/s     636.1\n") != std::string::npos);
  CHECK(tables.out.find("\ncost model: analytic <- kernel tables (" + kTables +
                        ": h200_sxm vllm, AIConfigurator (aiconfigurator-core 0.12.0))\n"
                        "  83.3% of the layers' time from the kernel tables (GEMMs 83.3%, attention 0.0%, tp collectives "
                        "0.0%), the rest from the model below\n"
                        "  distinct shapes asked: GEMM 9 (0 measured, 4 interpolated, 5 extrapolated, 0 not in the "
                        "tables), attention 0 (0 measured, 0 interpolated, 0 extrapolated, 0 not in the tables), tp "
                        "collective 0 (0 measured, 0 interpolated, 0 extrapolated, 0 not in the tables)\n"
                        "  the tables hold no generation_attention_perf: that work from the model below\n") !=
        std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(run_cli(with(args, {"--kernels", kTables, "--json"})).out);
  CHECK(j.at("kernel_tables").at("system") == "h200_sxm");
  CHECK(j.at("kernel_tables").at("absent_kinds") == nlohmann::json::array({"generation_attention_perf"}));
  CHECK(j.at("kernel_tables").at("gemm_s").get<double>() > 0);
  const CliResult plan = run_cli({"serve", "plan", "--model", "llama3-8b", "--cluster", "hgx-h200", "--gpus", "2",
                                  "--prompt-tokens", "512", "--output-tokens", "64", "--requests", "16", "--kernels",
                                  kTables});
  REQUIRE(plan.code == 0);
  CHECK(plan.out.find("\ncost model: analytic <- kernel tables (" + kTables) != std::string::npos);
  CHECK(plan.out.find("% of the layers' time from the kernel tables (GEMMs ") != std::string::npos);
  const CliResult missing = run_cli(with(args, {"--kernels", tmp("no-serve-tables")}));
  CHECK(missing.code == 2);
  CHECK(missing.err == "error: --kernels: kernel tables manifest file '" + tmp("no-serve-tables") + "' not found\n");
}

TEST_CASE("kernels compare prints B's times over A's by kind and group", "[cli][kernels]") {
  const CliResult r = run_cli({"kernels", "compare", kTables, kTables});
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("A: " + kTables + " (h200_sxm vllm, AIConfigurator (aiconfigurator-core 0.12.0))\nB: " + kTables, 0) ==
        0);
  CHECK(r.out.find("  gemm_perf               op_name=gemm, gemm_dtype=bfloat16                                         "
                   "      36         1.000     1.000     1.000\n") != std::string::npos);
  const CliResult missing = run_cli({"kernels", "compare", kTables, tmp("no-compare")});
  CHECK(missing.code == 2);
  CHECK(missing.err == "error: kernel tables manifest file '" + tmp("no-compare") + "' not found\n");
}

namespace {

// PIPEWRIGHT_KERNELS_HOME set to `home` for one test case, put back after it.
class KernelsHome {
 public:
  explicit KernelsHome(const std::string& home) {
    if (const char* old = std::getenv("PIPEWRIGHT_KERNELS_HOME")) old_ = old;
    std::filesystem::remove_all(home);
    std::filesystem::create_directories(home);
    setenv("PIPEWRIGHT_KERNELS_HOME", home.c_str(), 1);
  }
  ~KernelsHome() {
    if (old_) setenv("PIPEWRIGHT_KERNELS_HOME", old_->c_str(), 1);
    else unsetenv("PIPEWRIGHT_KERNELS_HOME");
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("installed tables: clusters name them, --kernels installed takes the cluster's GPU's", "[cli][kernels]") {
  const std::string home = tmp("installed-kernels-home");
  const KernelsHome scope(home);
  std::filesystem::copy(kTables, home + "/h200_sxm-vllm", std::filesystem::copy_options::recursive);
  const CliResult clusters = run_cli({"clusters"});
  REQUIRE(clusters.code == 0);
  std::istringstream lines(clusters.out);
  std::string line;
  std::getline(lines, line);
  CHECK(line.size() >= 13);
  CHECK(line.substr(line.size() - 13) == "kernel tables");
  int named = 0;
  while (std::getline(lines, line)) {
    const bool h200 = line.rfind("hgx-h200 ", 0) == 0;
    CHECK(line.substr(line.size() - (h200 ? 13 : 1)) == (h200 ? "h200_sxm-vllm" : "-"));
    named += h200;
  }
  CHECK(named == 1);
  const std::vector<std::string> args{"simulate", "--model", "llama3-8b", "--cluster", "hgx-h200", "--tp", "4",
                                      "--pp",     "2",       "--seq-len", "4096",      "--global-batch-size", "8",
                                      "--kernels", "installed"};
  const CliResult r = run_cli(args);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\ncost model: analytic <- kernel tables (" + home + "/h200_sxm-vllm: h200_sxm vllm, ") !=
        std::string::npos);
  CHECK(r.out.find("step time               480.2 ms") != std::string::npos);  // as with the folder given
  std::vector<std::string> h100 = args;
  h100[4] = "dgx-h100";
  const CliResult none = run_cli(h100);
  CHECK(none.code == 2);
  CHECK(none.err == "error: --kernels installed: no kernel tables in " + home +
                        " were measured on the H100 SXM 80GB; install its GPU's with `pipewright kernels import "
                        "aiconfigurator --system SYSTEM --backend BACKEND --install` (--list shows the systems) or give "
                        "a folder\n");
  const CliResult serve = run_cli({"serve", "simulate", "--model", "llama3-8b", "--cluster", "hgx-h200", "--requests",
                                   "4", "--kernels", "installed"});
  REQUIRE(serve.code == 0);
  CHECK(serve.out.find("\ncost model: analytic <- kernel tables (" + home + "/h200_sxm-vllm: ") != std::string::npos);
  const CliResult plan = run_cli({"plan", "--model", "llama3-8b", "--cluster", "hgx-h200", "--gpus", "8", "--seq-len",
                                  "4096", "--global-batch-size", "16", "--kernels", "installed", "--top", "1"});
  REQUIRE(plan.code == 0);
  CHECK(plan.out.find("kernel tables (" + home + "/h200_sxm-vllm") != std::string::npos);
}

TEST_CASE("kernels import --install writes into the installed tables, and refuses --out beside it", "[cli][kernels]") {
  const std::string home = tmp("install-kernels-home");
  const KernelsHome scope(home);
  CHECK(run_cli({"kernels", "import", "aiconfigurator", "--system", "h200_sxm", "--backend", "vllm", "--install",
                 "--out", tmp("x")})
            .err == "error: --install: the folder is the installed one; leave out --out\n");
  CHECK(run_cli({"kernels", "import", "aiconfigurator", "--system", "h200_sxm", "--install"}).err ==
        "error: --install: give --system and --backend (--list shows them)\n");
  if (pw::python_interpreter().find("/.venv/") == std::string::npos) {
    WARN("skipped: no .venv with pyarrow and aiconfigurator-core (scripts/install-deps.sh makes it)");
    return;
  }
  const CliResult r = run_cli({"kernels", "import", "aiconfigurator", "--system", "h100_sxm", "--backend", "vllm",
                               "--kinds", "gemm_perf", "--install"});
  REQUIRE(r.code == 0);
  CHECK(pw::KernelTables::open(home + "/h100_sxm-vllm")->system() == "h100_sxm");
  const CliResult clusters = run_cli({"clusters"});
  CHECK(clusters.out.find("dgx-h100 ") != std::string::npos);
  std::istringstream lines(clusters.out);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind("dgx-h100 ", 0) == 0) CHECK(line.substr(line.size() - 13) == "h100_sxm-vllm");
}
