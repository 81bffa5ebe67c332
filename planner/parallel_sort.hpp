#pragma once
// The planner's sorts of large ranges (the search's queue) on a few threads.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <vector>

#include "planner/parallel_for.hpp"

namespace pw {

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
