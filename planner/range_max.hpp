#pragma once
// The largest of a fixed array's values over any range [begin, end), in O(1) after O(n log n): the
// partitioner asks it for a stage's working memory (the largest transient of its layers) at every node.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <vector>

namespace pw {

class RangeMax {
 public:
  RangeMax() = default;
  explicit RangeMax(const std::vector<double>& values) {
    table_.push_back(values);
    for (std::size_t width = 1; 2 * width <= values.size(); width *= 2) {
      const std::vector<double>& prev = table_.back();
      std::vector<double> next(values.size() - 2 * width + 1);
      for (std::size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + width]);
      table_.push_back(std::move(next));
    }
  }

  // 0 for an empty range.
  double max(std::size_t begin, std::size_t end) const {
    if (end <= begin) return 0;
    const std::size_t level = static_cast<std::size_t>(std::bit_width(end - begin)) - 1;
    const std::vector<double>& row = table_[level];
    return std::max(row[begin], row[end - (std::size_t{1} << level)]);
  }

 private:
  std::vector<std::vector<double>> table_;  // table_[k][i]: the largest of values[i, i + 2^k)
};

}  // namespace pw
