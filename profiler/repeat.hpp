#pragma once
// How long a profiler repeats a measurement, and the loop that does it, shared by the CPU and CUDA
// profilers: warm-up runs first, then timed runs until both a count and a total time are reached.
#include <vector>

namespace pw {

struct ProfileOptions {
  int warmup = 3;               // runs before timing
  int min_repetitions = 10;     // timed runs, at least ...
  int max_repetitions = 1000;   // ... and at most
  double min_time_s = 0.2;      // timed runs continue until this much time passed (per layer and shape)
};

// Runs `once` (which returns the seconds of each of its `phases` phases) past the warm-up until enough runs
// and enough time have passed; the samples of each phase, in run order.
template <typename Once>
std::vector<std::vector<double>> repeat_phases(const ProfileOptions& o, int phases, Once once) {
  for (int i = 0; i < o.warmup; ++i) once();
  std::vector<std::vector<double>> samples(static_cast<size_t>(phases));
  double total = 0;
  for (int i = 0; i < o.max_repetitions && (i < o.min_repetitions || total < o.min_time_s); ++i) {
    const std::vector<double> t = once();
    for (int k = 0; k < phases; ++k) {
      samples[static_cast<size_t>(k)].push_back(t[static_cast<size_t>(k)]);
      total += t[static_cast<size_t>(k)];
    }
  }
  return samples;
}

}  // namespace pw
