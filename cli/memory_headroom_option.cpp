#include "cli/memory_headroom_option.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "core/error.hpp"

namespace pw {

CLI::Option* add_memory_headroom_option(CLI::App& cmd, std::string& text) {
  return cmd.add_option("--memory-headroom", text,
                        fmt::format("Share of each GPU's memory a plan leaves free for the allocator's fragmentation and "
                                    "the communication libraries' buffers, e.g. 5% (default {:g}%)",
                                    kDefaultMemoryHeadroom * 100));
}

void apply_memory_headroom(const std::string& text, Cluster& cluster) {
  if (text.empty()) return;
  const auto refuse = [&] {
    throw_bad_input("--memory-headroom: '{}' is not a share of the GPU's memory; give a percentage from 0% to {:g}%, "
                    "such as 5%",
                    text, kMaxMemoryHeadroom * 100);
  };
  if (text.size() < 2 || text.back() != '%') refuse();
  const std::string number = text.substr(0, text.size() - 1);
  char* end = nullptr;
  const double percent = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(percent) || percent < 0 ||
      percent > kMaxMemoryHeadroom * 100)
    refuse();
  cluster.memory_headroom = percent / 100;
}

}  // namespace pw
