#pragma once
// How long a profiler repeats a measurement, and the loops that do it, shared by the CPU and CUDA
// profilers: warm-up runs first, then timed runs until both a count and a total time are reached.
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

namespace pw {

struct ProfileOptions {
  int warmup = 3;               // runs before timing
  int min_repetitions = 10;     // timed runs, at least ...
  int max_repetitions = 1000;   // ... and at most
  double min_time_s = 0.2;      // timed runs continue until this much time passed (per layer and shape)
  // Measurements of several layers and sizes are taken in this many turns each (repeat_interleaved), so
  // that a machine that slows down or speeds up during the profile (another job, frequency scaling) moves
  // all of them alike instead of the ones measured at that moment.
  int rounds = 5;
};

// One run of a measurement: the seconds of each of its phases.
using TimedRun = std::function<std::vector<double>()>;

// Runs every item of `items` (each returning the seconds of its `phases` phases) past the warm-up, in
// `o.rounds` turns: in each turn, each item in order runs once untimed (its data back in the caches after
// the others ran) and then timed until its share of the runs and of the time (1 / rounds of each) is
// reached. The samples of each item and phase, in run order.
inline std::vector<std::vector<std::vector<double>>> repeat_interleaved(const ProfileOptions& o, int phases,
                                                                      const std::vector<TimedRun>& items) {
  const int rounds = std::max(1, o.rounds);
  std::vector<std::vector<std::vector<double>>> samples(
      items.size(), std::vector<std::vector<double>>(static_cast<size_t>(phases)));
  for (const TimedRun& once : items)
    for (int i = 0; i < o.warmup; ++i) once();
  for (int round = 0; round < rounds; ++round) {
    // Shares rounded so that the turns together reach at least the totals asked for.
    const int min_runs = (o.min_repetitions * (round + 1) + rounds - 1) / rounds;
    const int max_runs = std::max(min_runs, (o.max_repetitions * (round + 1)) / rounds);
    const double min_time = o.min_time_s * (round + 1) / rounds;
    for (size_t k = 0; k < items.size(); ++k) {
      if (rounds > 1) items[k]();
      std::vector<std::vector<double>>& mine = samples[k];
      double total = 0;
      for (const std::vector<double>& phase : mine)
        for (double t : phase) total += t;
      for (int i = static_cast<int>(mine.front().size()); i < max_runs && (i < min_runs || total < min_time); ++i) {
        const std::vector<double> t = items[k]();
        for (int p = 0; p < phases; ++p) {
          mine[static_cast<size_t>(p)].push_back(t[static_cast<size_t>(p)]);
          total += t[static_cast<size_t>(p)];
        }
      }
    }
  }
  return samples;
}

// The median of `v` (the mean of the middle two for an even count); 0 when empty.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One time from timings taken in turns (each turn's timings of the same thing): the median over the turns of
// each turn's mean. For a time that is summed over a run (a serving run's batches), the mean keeps the small
// hitches every turn meets, which the run pays too, and the median over turns drops a rare large one that
// only one turn met. 0 without timings.
inline double median_of_turn_means(const std::vector<std::vector<double>>& turns) {
  std::vector<double> means;
  for (const std::vector<double>& t : turns) {
    if (t.empty()) continue;
    double sum = 0;
    for (double v : t) sum += v;
    means.push_back(sum / static_cast<double>(t.size()));
  }
  return median_of(std::move(means));
}

// One measurement alone, in one turn: its samples per phase, in run order.
template <typename Once>
std::vector<std::vector<double>> repeat_phases(const ProfileOptions& o, int phases, Once once) {
  ProfileOptions one = o;
  one.rounds = 1;
  return repeat_interleaved(one, phases, {TimedRun(once)}).front();
}

}  // namespace pw
