#include "core/optimizer_precision.hpp"

#include <fmt/format.h>

#include <iterator>

namespace pw {
namespace {

constexpr StateDtype kStateDtypes[] = {StateDtype::Fp32, StateDtype::Fp16, StateDtype::Bf16, StateDtype::Fp8};

}  // namespace

const char* to_string(StateDtype d) {
  switch (d) {
    case StateDtype::Fp32: return "fp32";
    case StateDtype::Fp16: return "fp16";
    case StateDtype::Bf16: return "bf16";
    case StateDtype::Fp8: return "fp8";
  }
  return "?";
}

std::optional<StateDtype> state_dtype_from_string(const std::string& text) {
  for (StateDtype d : kStateDtypes)
    if (text == to_string(d)) return d;
  return std::nullopt;
}

std::string state_dtype_choices(const char* quote) {
  std::string out;
  const size_t n = std::size(kStateDtypes);
  for (size_t i = 0; i < n; ++i)
    out += fmt::format("{}{}{}{}", i == 0 ? "" : i + 1 == n ? " or " : ", ", quote, to_string(kStateDtypes[i]), quote);
  return out;
}

double bytes_of(StateDtype d) {
  switch (d) {
    case StateDtype::Fp32: return 4;
    case StateDtype::Fp16:
    case StateDtype::Bf16: return 2;
    case StateDtype::Fp8: return 1;
  }
  return 4;
}

std::optional<double> OptimizerPrecision::state_bytes() const {
  if (!precision_aware) return std::nullopt;
  return kMasterRemainderBytes + bytes_of(exp_avg) + bytes_of(exp_avg_sq);
}

}  // namespace pw
