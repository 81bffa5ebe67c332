#include "profiler/core_speed.hpp"

#include <algorithm>
#include <chrono>

#include "executor/cpu_tensor.hpp"

namespace pw {
namespace {

using Clock = std::chrono::steady_clock;

// The best rate of `work` units a call of `once` over at least 20 ms and 5 calls.
template <typename Once>
double best_rate(double work, Once once) {
  once();  // warm-up: caches, pages, the first call's setup
  double best = 0, spent = 0;
  for (int run = 0; run < 1000 && (run < 5 || spent < 0.02); ++run) {
    const auto t0 = Clock::now();
    once();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    spent += s;
    if (s > 0) best = std::max(best, work / s);
  }
  return best;
}

}  // namespace

CoreSpeed measured_core_speed() {
  constexpr Eigen::Index n = 256;
  const Mat a = Mat::Constant(n, n, 0.5f), b = Mat::Constant(n, n, 0.25f);
  Mat c(n, n);
  CoreSpeed speed;
  speed.flops = best_rate(2.0 * n * n * n, [&] { c.noalias() = a * b; });
  constexpr int kDraws = 1 << 16;
  std::vector<float> drawn(kDraws);
  Rng rng(1);
  speed.normals = best_rate(kDraws, [&] {
    for (float& x : drawn) x = static_cast<float>(rng.normal());
  });
  return speed;
}

}  // namespace pw
