// Two folders of kernel tables compared shape by shape (kernels/table_compare.hpp): the shared shapes, each
// folder's fastest kernel at each, and B's time over A's by kind and group.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "../temp_folder.hpp"
#include "kernels/table_compare.hpp"

using namespace pw;

namespace {

// A folder of one gemm_perf table with `keys` and `rows`, and, when `nccl`, an empty-of-shared-shapes nccl table.
std::shared_ptr<KernelTables> folder(const std::string& name, const std::vector<std::string>& keys,
                                     const nlohmann::json& rows, bool nccl) {
  const auto dir = fresh_folder(name);
  nlohmann::json listed = nlohmann::json::array();
  const auto add = [&](const char* kind, const std::vector<std::string>& k, const nlohmann::json& r) {
    std::ofstream(dir / (std::string(kind) + ".json"))
        << nlohmann::json{{"format", "pipewright-kernel-table"}, {"format_version", 1}, {"kind", kind},
                          {"keys", k},                          {"times", {"time_s"}},  {"rows", r}}
               .dump();
    listed.push_back({{"kind", kind}, {"file", std::string(kind) + ".json"}, {"rows", r.size()}});
  };
  add("gemm_perf", keys, rows);
  if (nccl) add("nccl_perf", {"op_name", "num_gpus", "message_size"}, {{"all_reduce", 8, name.size(), 1e-5}});
  std::ofstream(dir / "manifest.json") << nlohmann::json{{"format", "pipewright-kernel-table"},
                                                         {"format_version", 1},
                                                         {"system", "h200_sxm"},
                                                         {"software", name},
                                                         {"tables", listed}}
                                              .dump();
  return KernelTables::open(dir.string());
}

}  // namespace

TEST_CASE("two folders compare on the shapes both measured, each folder's fastest kernel at each", "[kernels]") {
  // A: bf16 at m 1..5 (1 us each), fp8 at m 1. B: bf16 at m 1..4 with two kernels (the faster 2, 3, 4, 5 us),
  // m 9 (not in A), fp8 at m 2 (not in A's fp8); B has a key A lacks (a kernel's name), left out.
  const auto a = folder("compare_a", {"gemm_dtype", "m"},
                        {{"bfloat16", 1, 1e-6},
                         {"bfloat16", 2, 1e-6},
                         {"bfloat16", 3, 1e-6},
                         {"bfloat16", 4, 1e-6},
                         {"bfloat16", 5, 1e-6},
                         {"fp8", 1, 1e-6}},
                        true);
  const auto b = folder("compare_b", {"kernel_source", "gemm_dtype", "m"},
                        {{"x", "bfloat16", 1, 2e-6},
                         {"y", "bfloat16", 1, 9e-6},
                         {"x", "bfloat16", 2, 3e-6},
                         {"y", "bfloat16", 3, 4e-6},
                         {"x", "bfloat16", 4, 5e-6},
                         {"x", "bfloat16", 9, 1e-6},
                         {"x", "fp8", 2, 1e-6}},
                        true);
  const std::vector<KindComparison> c = compare_tables(a, b);
  REQUIRE(c.size() == 2);
  CHECK(c[0].kind == "gemm_perf");
  CHECK(c[0].group == "gemm_dtype=bfloat16");
  CHECK(c[0].shapes == 4);
  CHECK(c[0].median == Approx(3.0));  // ratios 2, 3, 4, 5: nearest rank at half is the second
  CHECK(c[0].p10 == Approx(2.0));
  CHECK(c[0].p90 == Approx(5.0));
  // nccl_perf: A's message size 9 ("compare_a"), B's 9 too: one shape, B / A 1.
  CHECK(c[1].kind == "nccl_perf");
  CHECK(c[1].shapes == 1);
  CHECK(c[1].median == Approx(1.0));
  // A folder against one with no shared shape of a kind: that kind listed with none.
  const auto none = folder("compare_none", {"gemm_dtype", "m"}, {{"bfloat16", 64, 1e-6}}, false);
  const std::vector<KindComparison> d = compare_tables(a, none);
  REQUIRE(d.size() == 1);
  CHECK(d[0].kind == "gemm_perf");
  CHECK(d[0].shapes == 0);
}

TEST_CASE("A's GEMM shapes are also read from B between its points, as the cost model reads it", "[kernels]") {
  const auto a = folder("compare_read_a", {"gemm_dtype", "m", "n", "k"}, {{"bfloat16", 128, 64, 64, 4e-6}}, false);
  // B measured m 64 and 256 only, t = 1e-8 m: at m 128, 1.28 us, read in log space between the two.
  const auto b = folder("compare_read_b", {"gemm_dtype", "m", "n", "k"},
                        {{"bfloat16", 64, 64, 64, 64e-8}, {"bfloat16", 256, 64, 64, 256e-8}}, false);
  const std::vector<KindComparison> c = compare_tables(a, b);
  REQUIRE(c.size() == 2);
  CHECK(c[0].shapes == 0);  // no shape measured by both
  CHECK(c[1].group == "gemm_dtype=bfloat16, B read at A's shapes");
  CHECK(c[1].shapes == 1);
  CHECK(c[1].median == Approx(1.28e-6 / 4e-6));
}
