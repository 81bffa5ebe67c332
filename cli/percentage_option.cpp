#include "cli/percentage_option.hpp"

#include <cmath>
#include <cstdlib>

#include "core/error.hpp"

namespace pw {

double percentage_option(const std::string& text, std::string_view option, std::string_view of, double max_fraction) {
  const auto refuse = [&] {
    throw_bad_input("{}: '{}' is not a share of {}; give a percentage from 0% to {:g}%, such as 5%", option, text, of,
                    max_fraction * 100);
  };
  if (text.size() < 2 || text.back() != '%') refuse();
  const std::string number = text.substr(0, text.size() - 1);
  char* end = nullptr;
  const double percent = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(percent) || percent < 0 || percent > max_fraction * 100)
    refuse();
  return percent / 100;
}

}  // namespace pw
