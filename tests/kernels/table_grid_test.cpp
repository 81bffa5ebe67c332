// Reading times between and beyond measured points (kernels/table_grid.hpp): closed forms on a table made
// here, where t = c m n k (a power law, which the log-space rule reproduces exactly), and the refusals.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "../error_text.hpp"
#include "../temp_folder.hpp"
#include "kernels/kernel_queries.hpp"
#include "kernels/table_grid.hpp"

using namespace pw;

namespace {

constexpr double kC = 1e-15;  // seconds per m n k: 2 PFLOP/s counting 2 m n k

double power_law(double m, double n, double k) { return kC * m * n * k; }

// A gemm_perf table over m, n, k in {64, 256, 1024} for bfloat16 and one fp8 row, minus the points in `drop`.
std::filesystem::path write_gemm_table(const std::string& folder_name, const std::vector<std::vector<int>>& drop = {}) {
  const auto dir = fresh_folder(folder_name);
  nlohmann::json rows = nlohmann::json::array();
  long count = 0;
  for (int m : {64, 256, 1024})
    for (int n : {64, 256, 1024})
      for (int k : {64, 256, 1024}) {
        if (std::find(drop.begin(), drop.end(), std::vector<int>{m, n, k}) != drop.end()) continue;
        rows.push_back({"gemm", "cublas", "bfloat16", m, n, k, power_law(m, n, k)});
        ++count;
      }
  rows.push_back({"gemm", "cublas", "fp8", 64, 64, 64, 1e-6});
  ++count;
  const nlohmann::json table = {{"format", "pipewright-kernel-table"},
                                {"format_version", 1},
                                {"kind", "gemm_perf"},
                                {"keys", {"op_name", "kernel_source", "gemm_dtype", "m", "n", "k"}},
                                {"times", {"time_s"}},
                                {"rows", rows}};
  std::ofstream(dir / "gemm_perf.json") << table.dump();
  const nlohmann::json manifest = {{"format", "pipewright-kernel-table"},
                                   {"format_version", 1},
                                   {"system", "test"},
                                   {"software", "test"},
                                   {"tables", {{{"kind", "gemm_perf"}, {"file", "gemm_perf.json"}, {"rows", count}}}}};
  std::ofstream(dir / "manifest.json") << manifest.dump();
  return dir;
}

TableTime gemm_at(const std::filesystem::path& dir, double m, double n, double k, Precision p = Precision::Bf16) {
  KernelQueries q(KernelTables::open(dir.string()));
  return q.gemm(p, m, n, k);
}

}  // namespace

TEST_CASE("a measured shape returns its measured time exactly", "[kernels]") {
  const auto dir = write_gemm_table("grid_measured");
  const TableTime t = gemm_at(dir, 256, 1024, 64);
  CHECK(t.how == TableHow::Measured);
  CHECK(t.seconds == power_law(256, 1024, 64));
  CHECK(t.note.empty());
  const TableTime fp8 = gemm_at(dir, 64, 64, 64, Precision::Fp8);
  CHECK(fp8.how == TableHow::Measured);
  CHECK(fp8.seconds == 1e-6);
}

TEST_CASE("between measured points the log-space rule reproduces a power law", "[kernels]") {
  const auto dir = write_gemm_table("grid_between");
  // One axis between points, then all three.
  for (const auto& [m, n, k] : {std::tuple{128.0, 256.0, 64.0}, std::tuple{100.0, 700.0, 300.0}, std::tuple{65.0, 1000.0, 513.0}}) {
    const TableTime t = gemm_at(dir, m, n, k);
    INFO(m << " x " << n << " x " << k);
    CHECK(t.how == TableHow::Interpolated);
    CHECK(t.seconds == Approx(power_law(m, n, k)).epsilon(1e-12));
  }
  // Halfway in log space between 64 and 256 is 128: the geometric mean of the two times, not their average.
  const double lo = power_law(64, 64, 64), hi = power_law(256, 64, 64);
  CHECK(gemm_at(dir, 128, 64, 64).seconds == Approx(std::sqrt(lo * hi)).epsilon(1e-12));
}

TEST_CASE("past the measured range by at most 2x the edge's time is scaled, below it held, further out there is no time",
          "[kernels]") {
  // The grid alone: past 2x, no time.
  {
    const auto grid_dir = write_gemm_table("grid_outside_alone");
    const auto tables = KernelTables::open(grid_dir.string());
    TableGrid::Select select;
    select.text.emplace_back("gemm_dtype", "bfloat16");
    const TableGrid g(*tables->table("gemm_perf"), select, {"m", "n", "k"});
    const TableTime t = g.at({4096, 256, 256});
    CHECK(t.how == TableHow::Missing);
    CHECK(t.note == "gemm_perf (gemm_dtype=bfloat16): m 4096 is past the largest measured, 1024, by more than 2x");
  }
  const auto dir = write_gemm_table("grid_outside");
  const TableTime above = gemm_at(dir, 2048, 256, 256);
  CHECK(above.how == TableHow::Extrapolated);
  CHECK(above.seconds == Approx(power_law(1024, 256, 256) * 2).epsilon(1e-12));
  CHECK(above.note == "m 2048 past the largest measured, 1024: time scaled by 2x");
  const TableTime below = gemm_at(dir, 40, 256, 256);
  CHECK(below.how == TableHow::Extrapolated);
  CHECK(below.seconds == power_law(64, 256, 256));
  CHECK(below.note == "m 40 below the smallest measured, 64: that point's time");
  // A GEMM past 2x: equal slices within the range, each read (4 of m 1024 here, measured).
  const TableTime far = gemm_at(dir, 4096, 256, 256);
  CHECK(far.how == TableHow::Extrapolated);
  CHECK(far.seconds == 4 * power_law(1024, 256, 256));
  CHECK(far.note == "m 4096 read as 4 slices of 1024");
  const TableTime farther = gemm_at(dir, 3000, 256, 2500);
  CHECK(farther.how == TableHow::Extrapolated);
  CHECK(farther.seconds == Approx(3 * 3 * power_law(1000, 256, 2500.0 / 3)).epsilon(1e-12));
  CHECK(farther.note == "m 3000 read as 3 slices of 1000; k 2500 read as 3 slices of 833.333");
  CHECK(gemm_at(dir, 256, 256, 20).note ==
        "gemm_perf (gemm_dtype=bfloat16, kernel_source=cublas): k 20 is below the smallest measured, 64, by more than "
        "2x");
}

TEST_CASE("a cell with a corner never measured gives no time, and says which point", "[kernels]") {
  const auto dir = write_gemm_table("grid_hole", {{256, 256, 256}});
  const TableTime t = gemm_at(dir, 300, 300, 300);
  CHECK(t.how == TableHow::Missing);
  CHECK(t.note ==
        "gemm_perf (gemm_dtype=bfloat16, kernel_source=cublas): the point m=256, n=256, k=256 around the shape was "
        "never measured");
  // A cell without that point is whole.
  CHECK(gemm_at(dir, 64, 100, 100).how == TableHow::Interpolated);
}

TEST_CASE("a precision measured at one point reaches 2x past it, one never measured gives no time", "[kernels]") {
  const auto dir = write_gemm_table("grid_one_point");
  // fp8 has the point 64 x 64 x 64: n 128 lies past it by exactly 2x, so its time is doubled.
  const TableTime t = gemm_at(dir, 64, 128, 64, Precision::Fp8);
  CHECK(t.how == TableHow::Extrapolated);
  CHECK(t.seconds == Approx(2e-6));
  KernelQueries published(
      KernelTables::open(std::string(PIPEWRIGHT_SOURCE_DIR) + "/tests/fixtures/kernels/h200_sxm-vllm"));
  const TableTime none = published.gemm(Precision::Fp8, 4096, 4096, 4096);
  CHECK(none.how == TableHow::Missing);
  CHECK(none.note == "gemm_perf: no fp8 rows");
}

TEST_CASE("the published H200 tables: measured shapes exactly, others between them", "[kernels]") {
  KernelQueries q(KernelTables::open(std::string(PIPEWRIGHT_SOURCE_DIR) + "/tests/fixtures/kernels/h200_sxm-vllm"));
  // The row as AIConfigurator published it (0.525269349416097 ms).
  const TableTime gemm = q.gemm(Precision::Bf16, 4096, 12288, 4096);
  CHECK(gemm.how == TableHow::Measured);
  CHECK(gemm.seconds == 0.000525269349416097);
  const TableTime between = q.gemm(Precision::Bf16, 2048, 12288, 4096);
  CHECK(between.how == TableHow::Interpolated);
  CHECK(between.seconds < gemm.seconds);
  CHECK(between.seconds > gemm.seconds / 4);
  // 1 GiB over 8 GPUs in half precision: 2^29 elements, measured.
  const TableTime all_reduce = q.collective(TableCollective::AllReduce, Precision::Bf16, 1073741824.0 / 2, 8);
  CHECK(all_reduce.how == TableHow::Measured);
  CHECK(all_reduce.seconds == Approx(2.04031e-3));
  const TableTime attention = q.context_attention(Precision::Bf16, 1, 8192, 64, 8, 128);
  CHECK(attention.how == TableHow::Measured);
  CHECK(attention.seconds > 0);
}
