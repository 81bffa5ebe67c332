#include "kernels/installed_tables.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/table_cost_model.hpp"

namespace pw {
namespace fs = std::filesystem;

std::string kernel_tables_home() {
  if (const char* home = std::getenv("PIPEWRIGHT_KERNELS_HOME"); home && *home) return home;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data) return std::string(data) + "/pipewright/kernels";
  const char* user = std::getenv("HOME");
  return std::string(user && *user ? user : ".") + "/.local/share/pipewright/kernels";
}

std::vector<std::string> installed_kernel_tables() {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path home(kernel_tables_home());
  if (!fs::is_directory(home, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(home, ec))
    if (e.is_directory(ec) && fs::exists(e.path() / "manifest.json", ec)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string installed_tables_for(const GpuSpec& gpu) {
  std::string best;
  int best_rank = 1 << 30;
  for (const std::string& folder : installed_kernel_tables()) {
    std::shared_ptr<KernelTables> t;
    try {
      t = KernelTables::open(folder);
    } catch (const Error&) {
      continue;  // not a folder of tables after all; `kernels show` says why
    }
    if (!measured_on(gpu, *t)) continue;
    const std::vector<std::string> order{"trtllm", "vllm", "sglang"};
    const int rank = static_cast<int>(std::find(order.begin(), order.end(), t->software()) - order.begin());
    if (rank < best_rank) best = folder, best_rank = rank;
  }
  return best;
}

std::string resolve_kernels_option(const std::string& option, const GpuSpec& gpu) {
  if (const size_t comma = option.find(','); comma != std::string::npos)  // each of several folders alike
    return resolve_kernels_option(option.substr(0, comma), gpu) + "," + resolve_kernels_option(option.substr(comma + 1), gpu);
  if (option != "installed") return option;
  const std::string folder = installed_tables_for(gpu);
  if (folder.empty())
    throw_bad_input("--kernels installed: no kernel tables in {} were measured on the {}; install its GPU's with "
                    "`pipewright kernels import aiconfigurator --system SYSTEM --backend BACKEND --install` (--list "
                    "shows the systems) or give a folder",
                    kernel_tables_home(), gpu.name);
  return folder;
}

}  // namespace pw
