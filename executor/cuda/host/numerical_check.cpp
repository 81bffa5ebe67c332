#include "executor/cuda/host/numerical_check.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

double relative_error(const std::vector<float>& gpu, const std::vector<float>& cpu, const std::string& name) {
  if (gpu.size() != cpu.size())
    throw_bad_input("numerical check: {} has {} values on the GPU and {} on the CPU", name, gpu.size(), cpu.size());
  double diff = 0, ref = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double d = static_cast<double>(gpu[i]) - static_cast<double>(cpu[i]);
    diff += d * d;
    ref += static_cast<double>(cpu[i]) * static_cast<double>(cpu[i]);
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

bool NumericalCheck::passed() const {
  if (items.empty()) return false;
  for (const Item& i : items)
    if (!(i.relative_error <= tolerance)) return false;
  return true;
}

std::string NumericalCheck::table() const {
  std::string out;
  int ok = 0;
  for (const Item& i : items) {
    const bool good = i.relative_error <= tolerance;
    ok += good ? 1 : 0;
    out += fmt::format("  {:<4}  {:.1e}  {} ({} values)\n", good ? "ok" : "FAIL", i.relative_error, i.name, i.elements);
  }
  out += fmt::format("numerical check ({}, tolerance {:g}): {} of {} within tolerance\n", dtype, tolerance, ok, items.size());
  return out;
}

double check_tolerance(const std::string& dtype) {
  if (dtype == "bf16") return 2e-2;
  if (dtype == "fp32") return 1e-4;
  throw_bad_input("--dtype: must be bf16 or fp32, got '{}'", dtype);
}

}  // namespace pw
