#include "core/units.hpp"

#include <fmt/format.h>

#include <cmath>

namespace pw {
namespace {

// Three significant digits with an SI prefix; `base` unit without prefix.
std::string si(double value, const char* unit) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  double v = std::fabs(value);
  int i = 0;
  while (v >= 999.5 && i < 6) {
    v /= 1000.0;
    ++i;
  }
  double shown = value < 0 ? -v : v;
  int decimals = v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
  if (i == 0 && std::floor(v) == v) decimals = 0;
  return fmt::format("{:.{}f} {}{}", shown, decimals, prefixes[i], unit);
}

}  // namespace

std::string format_seconds(double s) {
  double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a >= 1.0) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.{}f} ms", s * 1e3, a >= 0.1 ? 1 : a >= 0.01 ? 2 : 3);
  if (a >= 1e-6) return fmt::format("{:.{}f} us", s * 1e6, a >= 1e-4 ? 0 : a >= 1e-5 ? 1 : 2);
  return fmt::format("{:.0f} ns", s * 1e9);
}

std::string format_bytes(double bytes) { return si(bytes, "B"); }
std::string format_rate(double bytes_per_s) { return si(bytes_per_s, "B/s"); }
std::string format_flops(double flops_per_s) { return si(flops_per_s, "FLOP/s"); }
std::string format_tflops(double flops_per_s) {
  return std::fabs(flops_per_s) >= 0.99995e12 ? fmt::format("{:.1f} TFLOP/s", flops_per_s / 1e12) : format_flops(flops_per_s);
}
std::string format_percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

std::string format_short(double n) {
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f} k", n / 1e3);
  return fmt::format("{:.1f}", n);
}

}  // namespace pw
