#pragma once
// Options given as a percentage, "5%": --memory-headroom, --batch-tolerance.
#include <string>
#include <string_view>

namespace pw {

// The fraction `text` ("2.5%") gives; BadInput naming `option`, its range 0% to `max_fraction` and what
// it is a share of (`of`) for anything else.
double percentage_option(const std::string& text, std::string_view option, std::string_view of, double max_fraction);

}  // namespace pw
