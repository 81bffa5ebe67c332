#pragma once
// The planner's loops over independent work (layer tables, bounds, the reported plans' splits, the baseline
// splits' simulations) on a few threads.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <future>
#include <iterator>
#include <thread>
#include <vector>

namespace pw {

// `requested` threads, or the machine's when 0 (at least 1).
inline int thread_count(int requested) {
  return requested > 0 ? requested : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// fn(0) .. fn(count - 1), each once, on up to thread_count(threads) threads (this one among them); the first
// exception a worker throws is rethrown here once all have stopped.
template <typename Fn>
void parallel_for(int threads, size_t count, Fn fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::future<void>> pool;
  for (size_t t = 1; t < std::min(static_cast<size_t>(thread_count(threads)), count); ++t)
    pool.push_back(std::async(std::launch::async, worker));
  std::exception_ptr error;
  try {
    worker();
  } catch (...) {
    error = std::current_exception();
  }
  for (auto& f : pool) {
    try {
      f.get();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// std::sort(first, last, less) on up to thread_count(threads) threads: runs of the range sorted at once, then
// merged pairwise. With a total order (no two elements equivalent) the result is std::sort's, element for
// element, whatever the threads (the search's queue of a million candidates sorted on one thread was a tenth
// of its wall time on two).
template <typename It, typename Less>
void parallel_sort(int threads, It first, It last, Less less) {
  constexpr size_t kMinRun = size_t{1} << 15;  // below this a thread costs more than it saves
  const auto n = static_cast<size_t>(std::distance(first, last));
  const size_t runs = std::min(static_cast<size_t>(thread_count(threads)), std::max<size_t>(1, n / kMinRun));
  if (runs <= 1) {
    std::sort(first, last, less);
    return;
  }
  std::vector<It> bounds;
  for (size_t r = 0; r <= runs; ++r) bounds.push_back(first + static_cast<std::ptrdiff_t>(n * r / runs));
  parallel_for(threads, runs, [&](size_t r) { std::sort(bounds[r], bounds[r + 1], less); });
  for (size_t width = 1; width < runs; width *= 2) {
    std::vector<size_t> lefts;
    for (size_t r = 0; r + width < runs; r += 2 * width) lefts.push_back(r);
    parallel_for(threads, lefts.size(), [&](size_t i) {
      const size_t r = lefts[i];
      std::inplace_merge(bounds[r], bounds[r + width], bounds[std::min(r + 2 * width, runs)], less);
    });
  }
}

}  // namespace pw
