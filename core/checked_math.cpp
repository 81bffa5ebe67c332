#include "core/checked_math.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace pw {

std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t product = 1;
  for (std::int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(product, f, &product)) return std::nullopt;
  }
  return product;
}

std::optional<std::int64_t> checked_sum(std::initializer_list<std::int64_t> terms) {
  std::int64_t sum = 0;
  for (std::int64_t t : terms) {
    if (__builtin_add_overflow(sum, t, &sum)) return std::nullopt;
  }
  return sum;
}

std::int64_t bounded_product(std::initializer_list<std::int64_t> factors, std::int64_t limit,
                             const std::string& what, const std::string& fix) {
  const std::optional<std::int64_t> product = checked_product(factors);
  if (product && *product <= limit) return *product;
  std::string expression;
  for (std::int64_t f : factors) expression += (expression.empty() ? "" : " x ") + std::to_string(f);
  throw_bad_input("{} = {} is beyond {}; {}", what, expression, limit, fix);
}

bool is_normal_or_zero(double x) {
  return std::isfinite(x) && (x == 0 || std::fabs(x) >= std::numeric_limits<double>::min());
}

void check_in_range(const std::string& name, double value, const FigureRange& range) {
  if (!(value >= range.min && value <= range.max))
    throw_bad_input("{}: must be from {:g} to {:g} {}, got {:g}", name, range.min, range.max, range.unit, value);
}

}  // namespace pw
