#pragma once
// numpy's legacy generator (np.random.seed / np.random.RandomState), draw for draw: the benchmark clients that
// size and pace requests with it (sglang.bench_serving's random dataset) then send the very requests a
// simulation of them sees. numpy freezes this stream ("RandomState ... will continue to produce the same
// values"), so the draws below stay those of every numpy version. Written from numpy's
// numpy/random/src/mt19937/mt19937.c (mt19937_seed, next_double), src/distributions/distributions.c
// (random_bounded_uint64_fill, buffered_bounded_masked_uint32) and src/legacy/legacy-distributions.c
// (legacy_exponential) at numpy/numpy@2b791a5906a2243b4e0a3318bd460b2062416fb9; python/tests checks them
// against numpy itself.
#include <cstdint>
#include <random>

namespace pw {

class NumpyLegacyRandom {
 public:
  // np.random.seed(seed): numpy takes 0 to 2^32 - 1 and seeds the Mersenne Twister as its reference code does.
  explicit NumpyLegacyRandom(std::uint32_t seed) : mt_(seed) {}

  // np.random.randint(low, high): a whole number in [low, high), high - low from 1 to 2^32 (the 32-bit path):
  // masked rejection, drawing nothing when the range holds one number.
  std::int64_t randint(std::int64_t low, std::int64_t high);
  // np.random.random_sample(): 53 bits from two 32-bit draws.
  double random_sample();
  // np.random.exponential(scale): scale x -log(1 - random_sample()).
  double exponential(double scale);

 private:
  // std::mt19937 is MT19937 with the reference seeding, bit for bit, on every standard library.
  std::mt19937 mt_;
};

}  // namespace pw
