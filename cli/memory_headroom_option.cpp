#include "cli/memory_headroom_option.hpp"

#include <fmt/format.h>

#include "cli/percentage_option.hpp"

namespace pw {

CLI::Option* add_memory_headroom_option(CLI::App& cmd, std::string& text) {
  return cmd.add_option("--memory-headroom", text,
                        fmt::format("Share of each GPU's memory a plan leaves free for the allocator's fragmentation and "
                                    "the communication libraries' buffers, e.g. 5% (default {:g}%)",
                                    kDefaultMemoryHeadroom * 100));
}

void apply_memory_headroom(const std::string& text, Cluster& cluster) {
  if (text.empty()) return;
  cluster.memory_headroom = percentage_option(text, "--memory-headroom", "the GPU's memory", kMaxMemoryHeadroom);
}

}  // namespace pw
