#include "serving/numpy_legacy_random.hpp"

#include <cmath>

#include "core/error.hpp"

namespace pw {

std::int64_t NumpyLegacyRandom::randint(std::int64_t low, std::int64_t high) {
  const std::uint64_t range = static_cast<std::uint64_t>(high - low) - 1;  // numpy's rng: the largest offset
  if (high <= low || range > 0xFFFFFFFFULL)
    throw_bad_input("randint: [{}, {}) is not a range of 1 to 2^32 numbers", low, high);
  if (range == 0) return low;
  if (range == 0xFFFFFFFFULL) return low + static_cast<std::int64_t>(mt_());
  // The smallest all-ones mask covering the range; a draw above the range is thrown away.
  std::uint32_t mask = static_cast<std::uint32_t>(range);
  for (int shift = 1; shift <= 16; shift *= 2) mask |= mask >> shift;
  std::uint32_t v = 0;
  do v = static_cast<std::uint32_t>(mt_()) & mask;
  while (v > range);
  return low + static_cast<std::int64_t>(v);
}

double NumpyLegacyRandom::random_sample() {
  const std::uint32_t a = static_cast<std::uint32_t>(mt_()) >> 5, b = static_cast<std::uint32_t>(mt_()) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

double NumpyLegacyRandom::exponential(double scale) { return scale * -std::log(1.0 - random_sample()); }

}  // namespace pw
