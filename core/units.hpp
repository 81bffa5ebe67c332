#pragma once
// Seconds and bytes inside; these turn them into text with units for people.
#include <string>

namespace pw {

std::string format_seconds(double s);         // "1.234 s", "12.5 ms", "830 us", "12 ns"
std::string format_bytes(double bytes);       // decimal: "79.2 GB", "512 MB", "12.0 kB", "17 B"
std::string format_rate(double bytes_per_s);  // "450 GB/s"
std::string format_flops(double flops_per_s); // "312 TFLOP/s"
// A GPU's achieved rate: "339.5 TFLOP/s" (one decimal, as papers quote it) from 1 TFLOP/s up; below,
// format_flops ("41.2 GFLOP/s"), so that a small model's rate does not read 0.0.
std::string format_tflops(double flops_per_s);
std::string format_percent(double fraction);  // 0.4567 -> "45.7%"
std::string format_short(double n);           // 180300 -> "180.3 k", 1234567 -> "1.23 M", 12.5 -> "12.5"

}  // namespace pw
