// Reading kernel-table folders (kernels/kernel_table.hpp): what is kept, and the one-line refusals that name
// the file and the row.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fstream>

#include "../error_text.hpp"
#include "../temp_folder.hpp"
#include "kernels/kernel_table.hpp"

using namespace pw;

namespace {

const std::string kFixture = std::string(PIPEWRIGHT_SOURCE_DIR) + "/tests/fixtures/kernels/h200_sxm-vllm";

// A folder with one table of the given rows (keys m and dtype, one time), its manifest counting `listed` rows.
std::filesystem::path folder_with(const std::string& name, const nlohmann::json& rows, long listed,
                                  const nlohmann::json& header = {}) {
  const auto dir = fresh_folder(name);
  nlohmann::json table = {{"format", "pipewright-kernel-table"}, {"format_version", 1}, {"kind", "gemm_perf"},
                          {"keys", {"gemm_dtype", "m"}},          {"times", {"time_s"}}, {"rows", rows}};
  for (const auto& [k, v] : header.items()) table[k] = v;
  std::ofstream(dir / "gemm_perf.json") << table.dump();
  const nlohmann::json manifest = {{"format", "pipewright-kernel-table"},
                                   {"format_version", 1},
                                   {"system", "test"},
                                   {"software", "test"},
                                   {"tables", {{{"kind", "gemm_perf"}, {"file", "gemm_perf.json"}, {"rows", listed}}}}};
  std::ofstream(dir / "manifest.json") << manifest.dump();
  return dir;
}

std::string load_error(const std::filesystem::path& dir) {
  return bad_input([&] { KernelTables::open(dir.string())->table("gemm_perf"); });
}

}  // namespace

TEST_CASE("a table's rows read the same before or after its columns are named", "[kernels]") {
  // nlohmann writes fields sorted ("rows" before "times"); pipewright's importer writes the columns first.
  const auto dir = fresh_folder("table_columns_first");
  std::ofstream(dir / "gemm_perf.json")
      << R"({"format": "pipewright-kernel-table", "format_version": 1, "kind": "gemm_perf", "keys": ["gemm_dtype", "m"],)"
         R"( "times": ["time_s"], "rows": [["bf16", 64, 1e-6], ["fp8", 128, 2e-6]]})";
  const KernelTable first = KernelTable::load((dir / "gemm_perf.json").string());
  const auto sorted = folder_with("table_columns_last", {{"bf16", 64, 1e-6}, {"fp8", 128, 2e-6}}, 2);
  const KernelTable last = KernelTable::load((sorted / "gemm_perf.json").string());
  for (const KernelTable* t : {&first, &last}) {
    CHECK(t->rows() == 2);
    CHECK(t->text(0, 1) == "fp8");
    CHECK(t->number(1, 1) == 128);
    CHECK(t->seconds(0, 0) == 1e-6);
  }
}

TEST_CASE("a folder's manifest names the system, software, versions and tables, a table loads when asked", "[kernels]") {
  const auto tables = KernelTables::open(kFixture);
  CHECK(tables->system() == "h200_sxm");
  CHECK(tables->software() == "vllm");
  CHECK(tables->versions().at("gemm") == "0.24.0");
  CHECK(tables->versions().at("nccl") == "2.29.2");
  CHECK(tables->source() == "AIConfigurator (aiconfigurator-core 0.12.0)");
  REQUIRE(tables->entries().size() == 3);
  CHECK(tables->has("nccl_perf"));
  CHECK(!tables->has("moe_perf"));
  CHECK(tables->table("moe_perf") == nullptr);
  const KernelTable* gemm = tables->table("gemm_perf");
  REQUIRE(gemm != nullptr);
  CHECK(gemm->rows() == 36);
  CHECK(gemm->keys() == std::vector<std::string>{"op_name", "kernel_source", "gemm_dtype", "m", "n", "k"});
  CHECK(gemm->times() == std::vector<std::string>{"time_s"});
  CHECK(gemm->key_is_text(gemm->key_index("gemm_dtype")));
  CHECK(!gemm->key_is_text(gemm->key_index("m")));
  CHECK(gemm->text_values(gemm->key_index("gemm_dtype")) == std::vector<std::string>{"bfloat16"});
  // The same file, the second time, from memory.
  CHECK(tables->table("gemm_perf") == gemm);
  // The manifest itself may be named.
  CHECK(KernelTables::open(kFixture + "/manifest.json")->entries().size() == 3);
}

TEST_CASE("a table that is not one is refused in one line naming the file and the row", "[kernels]") {
  const auto good = nlohmann::json::array({{"bf16", 64, 1e-6}, {"bf16", 128, 2e-6}});
  CHECK(load_error(folder_with("table_good", good, 2)) == "no error");
  auto dir = folder_with("table_short_row", {{"bf16", 64, 1e-6}, {"bf16", 128}}, 2);
  CHECK(load_error(dir) == (dir / "gemm_perf.json").string() + " row 2: 2 values, expected 3 (2 keys and 1 times)");
  dir = folder_with("table_negative", {{"bf16", 64, 1e-6}, {"bf16", 128, -1}}, 2);
  CHECK(load_error(dir) == (dir / "gemm_perf.json").string() + " row 2: time_s is -1, not a time in seconds (0 to 1e6)");
  dir = folder_with("table_mixed", {{"bf16", 64, 1e-6}, {"bf16", "128", 2e-6}}, 2);
  CHECK(load_error(dir) ==
        (dir / "gemm_perf.json").string() + " row 2: 'm' is \"128\", where the first row holds a number");
  dir = folder_with("table_count", good, 3);
  CHECK(load_error(dir) == (dir / "gemm_perf.json").string() +
                               ": 2 rows, the manifest says 3; the folder was changed after it was written");
  dir = folder_with("table_foreign", good, 2, {{"format", "aiconfigurator"}});
  CHECK(load_error(dir) == (dir / "gemm_perf.json").string() +
                               ": format is \"aiconfigurator\", not \"pipewright-kernel-table\"; this is not a pipewright "
                               "kernel table");
  dir = folder_with("table_version", good, 2, {{"format_version", 2}});
  CHECK(load_error(dir) ==
        (dir / "gemm_perf.json").string() + ": format_version is 2; this pipewright reads version 1 (re-import the tables)");
  dir = folder_with("table_nested", {{"bf16", {64}, 1e-6}}, 1);
  CHECK(load_error(dir) == (dir / "gemm_perf.json").string() + " row 1: value 2 is a list, not a number or text");
  dir = folder_with("table_truncated", good, 2);
  {
    const std::string whole = file_contents(dir / "gemm_perf.json");
    std::ofstream(dir / "gemm_perf.json") << whole.substr(0, whole.size() - 5);
  }
  CHECK(load_error(dir).rfind((dir / "gemm_perf.json").string() + ": malformed JSON at byte ", 0) == 0);
  const auto empty = fresh_folder("table_no_manifest");
  CHECK(bad_input([&] { KernelTables::open(empty.string()); }) ==
        "--kernels: '" + empty.string() +
            "' has no manifest.json; give a folder `pipewright kernels import` or `profile --kernels-out` wrote");
}

TEST_CASE("a manifest may record the measured GPU's memory bandwidth, and a bad one is refused", "[kernels]") {
  const auto dir = folder_with("table_gpu", nlohmann::json::array({{"bf16", 64, 1e-6}}), 1);
  CHECK(KernelTables::open(dir.string())->hbm_bytes_per_s() == 0);
  nlohmann::json manifest = nlohmann::json::parse(file_contents(dir / "manifest.json"));
  manifest["gpu"] = {{"hbm_bytes_per_s", 2.039e12}, {"memory_bytes", 85899345920.0}};
  std::ofstream(dir / "manifest.json") << manifest.dump();
  CHECK(KernelTables::open(dir.string())->hbm_bytes_per_s() == 2.039e12);
  manifest["gpu"]["hbm_bytes_per_s"] = "fast";
  std::ofstream(dir / "manifest.json") << manifest.dump();
  CHECK(bad_input([&] { KernelTables::open(dir.string()); }) ==
        (dir / "manifest.json").string() + ": gpu.hbm_bytes_per_s must be a positive number of bytes a second");
}
