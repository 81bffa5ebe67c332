#pragma once
// The planner's loops over independent work (layer tables, bounds, the reported plans' splits, the baseline
// splits' simulations) on a few threads.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <future>
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

}  // namespace pw
