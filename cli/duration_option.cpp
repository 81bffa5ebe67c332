#include "cli/duration_option.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace pw {

std::optional<double> duration_seconds(const std::string& text, double bare_unit_s) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return std::nullopt;
  const std::string unit(end);
  if (unit.empty()) return number * bare_unit_s;
  static constexpr std::array<std::pair<const char*, double>, 6> kUnits{
      {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}, {"min", 60.0}, {"h", 3600.0}, {"d", 86400.0}}};
  for (const auto& [name, seconds] : kUnits)
    if (unit == name) return number * seconds;
  return std::nullopt;
}

CLI::Option* as_duration(CLI::Option* opt, double unit_s) {
  const CLI::Validator duration(
      [unit_s](std::string& text) -> std::string {
        const std::optional<double> seconds = duration_seconds(text, unit_s);
        if (!seconds) return fmt::format("'{}' is not a duration; give a number with a unit: us, ms, s, min, h or d (e.g. 50ms)", text);
        text = fmt::format("{:.17g}", *seconds / unit_s);
        return "";
      },
      "");
  return opt->transform(duration)->type_name("DURATION");
}

}  // namespace pw
