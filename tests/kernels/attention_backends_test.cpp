// An engine's attention backend (kernels/attention_backends.hpp) and the tables priced from its kernels alone
// (KernelQueries::only_attention_kernels, TableCostModel::only_attention_kernels).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "../error_text.hpp"
#include "../temp_folder.hpp"
#include "core/analytic_cost_model.hpp"
#include "kernels/attention_backends.hpp"
#include "kernels/kernel_queries.hpp"
#include "kernels/table_cost_model.hpp"

using namespace pw;

namespace {

constexpr double kFa3C = 1e-12;  // fa3's decode attention: seconds per batch x step x heads; triton's 1.5 times it

// An h200_sxm folder of generation_attention_perf alone: kernels "fa3" and "triton" at batch 8 to 32, step 512 to
// 2048 and 16 to 64 query heads, four to a kv head, head dim 128, bf16 cache.
std::shared_ptr<KernelTables> two_kernel_tables(const std::string& name) {
  const auto dir = fresh_folder(name);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [kernel, factor] : {std::pair{"fa3", 1.0}, std::pair{"triton", 1.5}})
    for (int b : {8, 16, 32})
      for (int step : {512, 1024, 2048})
        for (int h : {16, 32, 64})
          rows.push_back({kernel, "bfloat16", 128, h / 4, 0, 1, 1, b, step, h, factor * kFa3C * b * step * h});
  const nlohmann::json t = {{"format", "pipewright-kernel-table"},
                            {"format_version", 1},
                            {"kind", "generation_attention_perf"},
                            {"keys",
                             {"kernel_source", "kv_cache_dtype", "head_dim", "num_key_value_heads", "window_size",
                              "beam_width", "isl", "batch_size", "step", "num_heads"}},
                            {"times", {"time_s"}},
                            {"rows", rows}};
  std::ofstream(dir / "generation_attention_perf.json") << t.dump();
  std::ofstream(dir / "manifest.json") << nlohmann::json{
      {"format", "pipewright-kernel-table"}, {"format_version", 1}, {"system", "h200_sxm"}, {"software", "sglang"},
      {"tables", {{{"kind", "generation_attention_perf"}, {"file", "generation_attention_perf.json"}, {"rows", rows.size()}}}}}
                                               .dump();
  return KernelTables::open(dir.string());
}

}  // namespace

TEST_CASE("an engine's attention backends by its own names, and the kernels its tables time them under",
          "[kernels]") {
  CHECK(attention_backend("sglang", "fa3").kernel_sources == std::vector<std::string>{"fa3"});
  CHECK(attention_backend("vllm", "FLASHINFER").kernel_sources ==
        std::vector<std::string>{"vllm_flashinfer", "vllm_flashinfer_trtllmprefill", "vllm_flashinfer_trtllmdecode"});
  CHECK(attention_backend("vllm", "FLASH_ATTN").kernel_sources ==
        std::vector<std::string>{"vllm_flash_attn_fa3", "vllm_flash_attn_fa4"});
  CHECK(bad_input([] { attention_backend("sglang", "FA3"); }) ==
        "--attention-backend: 'FA3' is not one of sglang's; use fa3, flashinfer, triton, trtllm_mha");
  CHECK(bad_input([] { attention_backend("vllm", "fa3"); }) ==
        "--attention-backend: 'fa3' is not one of vllm's; use FLASH_ATTN, FLASHINFER, TRITON_ATTN");
  CHECK(bad_input([] { attention_backend("tgi", "fa3"); }) ==
        "--attention-backend: the engine 'tgi' has no attention backends modelled");
}

TEST_CASE("a decode's attention from one backend's kernels alone, or from the fastest the tables measured",
          "[kernels]") {
  KernelQueries q(two_kernel_tables("attention_backends_queries"));
  CHECK(q.attention_kernels() == std::vector<std::string>{"fa3", "triton"});
  // 16 sequences of 1025 tokens in cache (step 1024), 32 heads over 8 kv heads: a measured point of both kernels.
  const double fa3 = kFa3C * 16 * 1024 * 32;
  const TableTime any = q.generation_attention(false, 16, 1025, 32, 8, 128);
  REQUIRE(any.found());
  CHECK(any.seconds == Approx(fa3).epsilon(1e-12));  // the faster of the two
  q.only_attention_kernels({"triton"});
  const TableTime triton = q.generation_attention(false, 16, 1025, 32, 8, 128);
  REQUIRE(triton.found());
  CHECK(triton.seconds == Approx(1.5 * fa3).epsilon(1e-12));
  // Of several kernels a backend runs under, the fastest the tables hold.
  q.only_attention_kernels({"flashinfer", "triton", "fa3"});
  CHECK(q.generation_attention(false, 16, 1025, 32, 8, 128).seconds == Approx(fa3).epsilon(1e-12));
  q.only_attention_kernels({"flashinfer"});
  const TableTime none = q.generation_attention(false, 16, 1025, 32, 8, 128);
  CHECK(!none.found());
  CHECK(none.note == "generation_attention_perf: no rows of flashinfer");
}

TEST_CASE("an attention backend the tables do not time is refused, and the model names the one it prices", "[kernels]") {
  const AnalyticCostModel analytic;
  TableCostModel tables(analytic, two_kernel_tables("attention_backends_model"));
  CHECK(bad_input([&] { tables.only_attention_kernels(attention_backend("sglang", "flashinfer")); }) ==
        "--attention-backend flashinfer: h200_sxm sglang's tables time no flashinfer attention (their attention kernels: "
        "fa3, triton); use one they time or other tables");
  CHECK(tables.attention_backend().empty());
  // Tables without attention (GEMMs alone) time no backend.
  const auto dir = fresh_folder("attention_backends_gemms_only");
  std::ofstream(dir / "gemm_perf.json") << nlohmann::json{{"format", "pipewright-kernel-table"}, {"format_version", 1},
                                                          {"kind", "gemm_perf"}, {"keys", {"gemm_dtype", "m", "n", "k"}},
                                                          {"times", {"time_s"}}, {"rows", {{"bfloat16", 1, 1, 1, 1e-6}}}}
                                                .dump();
  std::ofstream(dir / "manifest.json") << nlohmann::json{
      {"format", "pipewright-kernel-table"}, {"format_version", 1}, {"system", "h200_sxm"}, {"software", "sglang"},
      {"tables", {{{"kind", "gemm_perf"}, {"file", "gemm_perf.json"}, {"rows", 1}}}}}
                                               .dump();
  TableCostModel gemms(analytic, KernelTables::open(dir.string()));
  CHECK(bad_input([&] { gemms.only_attention_kernels(attention_backend("sglang", "fa3")); }) ==
        "--attention-backend fa3: h200_sxm sglang's tables time no fa3 attention (they name no attention kernels); use "
        "one they time or other tables");
  tables.only_attention_kernels(attention_backend("sglang", "triton"));
  CHECK(tables.attention_backend() == "triton");
  CHECK(tables.name() == "kernel tables (h200_sxm sglang, attention triton) over analytic");
}
