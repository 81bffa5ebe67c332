#include "core/machine_memory.hpp"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace pw {

std::optional<double> mem_available_bytes(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  const size_t at = meminfo.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = meminfo.substr(at + key.size());
  rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
  std::uint64_t kib = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
  if (ec != std::errc() || std::string_view(end, rest.data() + rest.size()).substr(0, 3) != " kB") return std::nullopt;
  return static_cast<double>(kib) * 1024;
}

double available_memory_bytes() {
  std::ifstream file("/proc/meminfo");
  std::ostringstream text;
  text << file.rdbuf();
  if (const std::optional<double> available = mem_available_bytes(text.str())) return *available;
  return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

}  // namespace pw
