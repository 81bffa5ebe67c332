#pragma once
// Bounds before work: a command estimates the memory and time its inputs ask for and refuses, in one line
// and before it starts, what this machine cannot give (a bad_alloc after 80 s tells nobody anything);
// --allow-large, the same flag on every command, lets it try anyway.
#include <cstdint>
#include <string>
#include <vector>

namespace pw {

// One part of a command's work: what it counts, with the options it comes from, and what it would take.
struct WorkEstimate {
  std::string work;  // "3,000,000,000 actions (--pp 1 x 1 chunk x --microbatches 1000000000 x 3)"
  double bytes = 0;
  double seconds = 0;
  std::string fix;   // "lower --microbatches"
};

struct WorkLimits {
  double memory_bytes = 0;  // this machine's available memory (core/machine_memory.hpp)
  double seconds = 0;
};

// Available memory now, and kWorkSecondsLimit.
WorkLimits machine_work_limits();
// A command that would run longer than this is a mistake more often than not.
inline constexpr double kWorkSecondsLimit = 600;

// BadInput when the parts together need more memory or time than the limits, naming the largest part:
//   "<command>: <work> would take about <bytes>; the limit is <limit> of this machine's memory; <fix> or
//    pass --allow-large"
//   "<command>: <work> would take about <duration>; the limit is <limit>; <fix> or pass --allow-large"
void check_work(const std::string& command, const std::vector<WorkEstimate>& parts, const WorkLimits& limits);

// 8000000000 -> "8,000,000,000".
std::string with_commas(std::int64_t n);
// A count held in a double: with commas while it is exact, else 9.01e+15.
std::string format_count(double n);

// 90 -> "1.5 min", 7200 -> "2.0 h", 12 -> "12 s": a duration people read at a glance.
std::string format_duration(double seconds);

}  // namespace pw
