#include <fmt/format.h>

#include <algorithm>

#include "schedules/ir.hpp"

namespace pw {

namespace {

bool is_marked(const std::vector<GridCell>& marked, int rank, int step) {
  return std::any_of(marked.begin(), marked.end(),
                     [&](const GridCell& c) { return c.rank == rank && c.step == step; });
}

void trim_right(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

}  // namespace

std::string to_grid(const Schedule& s) { return to_grid(s, {}); }

namespace {

// A half-open range of at most `most` indices of [0, total), centred on `at` where the ends allow.
std::pair<int, int> window(int at, int most, int total) {
  if (total <= most) return {0, total};
  const int lo = std::clamp(at - most / 2, 0, total - most);
  return {lo, lo + most};
}

// The grid of ranks [r0, r1) and steps [k0, k1).
std::string grid_of(const Schedule& s, const std::vector<GridCell>& marked, int r0, int r1, int k0, int k1) {
  std::vector<std::vector<std::string>> cells;
  size_t width = fmt::format("{}", k1 <= k0 ? 0 : k1 - 1).size();
  for (int r = r0; r < r1; ++r) {
    const auto& list = s.ranks[static_cast<size_t>(r)];
    std::vector<std::string>& row = cells.emplace_back();
    for (int k = k0; k < std::min(k1, static_cast<int>(list.size())); ++k) {
      std::string text = to_text(list[static_cast<size_t>(k)]);
      if (is_marked(marked, r, k)) text = "[" + text + "]";
      width = std::max(width, text.size());
      row.push_back(std::move(text));
    }
  }
  const std::string last_label = fmt::format("rank {}", r1 <= r0 ? 0 : r1 - 1);
  const size_t label_width = std::max(last_label.size(), std::string("step").size());

  std::string out;
  std::string line = fmt::format("{:<{}} |", "step", label_width);
  for (int k = k0; k < k1; ++k) line += fmt::format(" {:<{}}", k, width);
  trim_right(line);
  out += line + "\n";
  for (int r = r0; r < r1; ++r) {
    line = fmt::format("{:<{}} |", fmt::format("rank {}", r), label_width);
    for (const std::string& text : cells[static_cast<size_t>(r - r0)]) line += fmt::format(" {:<{}}", text, width);
    trim_right(line);
    out += line + "\n";
  }
  return out;
}

int longest_list(const Schedule& s) {
  size_t steps = 0;
  for (const auto& list : s.ranks) steps = std::max(steps, list.size());
  return static_cast<int>(steps);
}

}  // namespace

std::string to_grid(const Schedule& s, const std::vector<GridCell>& marked) {
  return grid_of(s, marked, 0, static_cast<int>(s.ranks.size()), 0, longest_list(s));
}

std::string to_grid_around(const Schedule& s, const std::vector<GridCell>& marked, int most_ranks, int most_steps) {
  const int ranks = static_cast<int>(s.ranks.size()), steps = longest_list(s);
  const GridCell at = marked.empty() ? GridCell{} : marked.front();
  const auto [r0, r1] = window(at.rank, std::max(1, most_ranks), ranks);
  const auto [k0, k1] = window(at.step, std::max(1, most_steps), steps);
  std::string out;
  if (r1 - r0 < ranks || k1 - k0 < steps)
    out = fmt::format("(ranks {}-{} of {}, steps {}-{} of {})\n", r0, r1 - 1, ranks, k0, k1 - 1, steps);
  return out + grid_of(s, marked, r0, r1, k0, k1);
}

}  // namespace pw
