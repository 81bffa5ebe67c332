#pragma once
// Products and sums of counts a user gave (ranks, micro-batches, sequences, layers, bytes on the wire):
// they are refused when they leave the range of a 64-bit integer instead of wrapping around into a
// negative batch or a tiny allocation.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "core/file_caps.hpp"

namespace pw {

// The product, or nothing when it overflows int64 (or a factor is negative).
std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors);
std::optional<std::int64_t> checked_sum(std::initializer_list<std::int64_t> terms);

// The product, or BadInput "<what> = a x b x ... is beyond <limit>; <fix>" when it overflows or
// exceeds `limit`. `what` names the quantity and the options or fields it comes from.
std::int64_t bounded_product(std::initializer_list<std::int64_t> factors, std::int64_t limit,
                             const std::string& what, const std::string& fix);

// True when `x` is a finite number that is zero or at least the smallest normal double: denormals
// are refused where a figure is divided by or multiplied up (a 1e-310 TFLOP/s GPU makes every
// layer cost infinite).
bool is_normal_or_zero(double x);

// BadInput "<name>: must be from <min> to <max> <unit>, got <value>" unless min <= value <= max (NaN too).
void check_in_range(const std::string& name, double value, const FigureRange& range);

}  // namespace pw
