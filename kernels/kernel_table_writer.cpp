#include "kernels/kernel_table_writer.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "core/error.hpp"
#include "kernels/kernel_table.hpp"

namespace pw {
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) throw_runtime("--kernels-out: cannot write '{}'", path.string());
}

}  // namespace

// The manifest and every table in the folder `partial`, renamed into place by the caller.
static void write_partial_folder(const fs::path& partial, const KernelTablesOut& t);

void check_new_kernel_folder(const std::string& folder) {
  std::error_code ec;
  if (fs::exists(folder, ec) && (!fs::is_directory(folder, ec) || !fs::is_empty(folder, ec)))
    throw_bad_input("--kernels-out: '{}' exists; give a new folder (nothing is overwritten)", folder);
}

void write_kernel_tables(const std::string& folder, const KernelTablesOut& t) {
  check_new_kernel_folder(folder);
  std::error_code ec;
  const fs::path final_path(folder);
  const fs::path partial = fs::path(final_path.string() + fmt::format(".partial-{}", getpid()));
  fs::create_directories(partial, ec);
  if (ec) throw_runtime("--kernels-out: cannot make '{}': {}", partial.string(), ec.message());
  try {
    write_partial_folder(partial, t);
  } catch (...) {
    fs::remove_all(partial, ec);  // the folder is written whole or not at all
    throw;
  }
  if (fs::is_directory(final_path, ec)) fs::remove(final_path, ec);  // empty: checked above
  fs::rename(partial, final_path, ec);
  if (ec) {
    const std::string reason = ec.message();
    fs::remove_all(partial, ec);
    throw_runtime("--kernels-out: cannot rename '{}' to '{}': {}", partial.string(), folder, reason);
  }
}

static void write_partial_folder(const fs::path& partial, const KernelTablesOut& t) {
  nlohmann::ordered_json manifest = {{"format", kKernelTableFormat},
                                     {"format_version", kKernelTableFormatVersion},
                                     {"system", t.system},
                                     {"software", t.software},
                                     {"versions", nlohmann::ordered_json::object()},
                                     {"source", {{"name", t.source}}}};
  if (t.hbm_bytes_per_s > 0) manifest["gpu"] = {{"hbm_bytes_per_s", t.hbm_bytes_per_s}};
  nlohmann::ordered_json listed = nlohmann::ordered_json::array();
  for (const KernelTableOut& table : t.tables) {
    const std::string file = table.kind + ".json";
    const nlohmann::ordered_json doc = {{"format", kKernelTableFormat},
                                        {"format_version", kKernelTableFormatVersion},
                                        {"kind", table.kind},
                                        {"keys", table.keys},
                                        {"times", {"time_s"}},
                                        {"measured_on", table.measured_on},
                                        {"rows", table.rows}};
    write_file(partial / file, doc.dump() + "\n");
    listed.push_back({{"kind", table.kind}, {"file", file}, {"rows", table.rows.size()}, {"from", "measured"}});
  }
  manifest["tables"] = listed;
  write_file(partial / "manifest.json", manifest.dump(1) + "\n");
}

}  // namespace pw
