#include "core/work_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/machine_memory.hpp"
#include "core/units.hpp"

namespace pw {

WorkLimits machine_work_limits() { return WorkLimits{available_memory_bytes(), kWorkSecondsLimit}; }

void check_work(const std::string& command, const std::vector<WorkEstimate>& parts, const WorkLimits& limits) {
  if (parts.empty()) return;
  double bytes = 0, seconds = 0;
  for (const WorkEstimate& p : parts) {
    bytes += p.bytes;
    seconds += p.seconds;
  }
  if (bytes > limits.memory_bytes) {
    const WorkEstimate& most = *std::max_element(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
      return a.bytes < b.bytes;
    });
    throw_bad_input("{}: {} would take about {}; the limit is {} of this machine's memory; {} or pass --allow-large",
                    command, most.work, format_bytes(bytes), format_bytes(limits.memory_bytes), most.fix);
  }
  if (seconds > limits.seconds) {
    const WorkEstimate& most = *std::max_element(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
      return a.seconds < b.seconds;
    });
    throw_bad_input("{}: {} would take about {}; the limit is {}; {} or pass --allow-large", command, most.work,
                    format_duration(seconds), format_duration(limits.seconds), most.fix);
  }
}

std::string with_commas(std::int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n));
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_count(double n) {
  return n < 9e15 ? with_commas(static_cast<std::int64_t>(n)) : fmt::format("{:.3g}", n);
}

std::string format_duration(double seconds) {
  if (seconds >= 3600) return fmt::format("{:.1f} h", seconds / 3600);
  if (seconds >= 60) return fmt::format("{:.1f} min", seconds / 60);
  if (seconds >= 1 || seconds <= 0) return fmt::format("{:.0f} s", seconds);
  return fmt::format("{:.0f} ms", seconds * 1e3);
}

}  // namespace pw
