#pragma once
// Durations on the command line take a unit: 50ms, 2.5s, 30min, 24h, 7d (a bare number is in the
// option's own unit, as before). The option's variable receives the value in that unit.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace pw {

// `text` in seconds: a number with an optional unit (us, ms, s, min, h, d); nullopt when it is not.
std::optional<double> duration_seconds(const std::string& text, double bare_unit_s);

// Makes `opt` a duration: its text is rewritten into a number in units of `unit_s` seconds (1 for
// seconds, 3600 for hours) before the option's own parsing and range checks see it.
CLI::Option* as_duration(CLI::Option* opt, double unit_s);

}  // namespace pw
