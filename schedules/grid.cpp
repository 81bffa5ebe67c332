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

std::string to_grid(const Schedule& s, const std::vector<GridCell>& marked) {
  const int rows = static_cast<int>(s.ranks.size());
  size_t steps = 0;
  for (const auto& list : s.ranks) steps = std::max(steps, list.size());

  std::vector<std::vector<std::string>> cells(s.ranks.size());
  size_t width = fmt::format("{}", steps == 0 ? 0 : steps - 1).size();
  for (int r = 0; r < rows; ++r) {
    const auto& list = s.ranks[static_cast<size_t>(r)];
    for (size_t k = 0; k < list.size(); ++k) {
      std::string text = to_text(list[k]);
      if (is_marked(marked, r, static_cast<int>(k))) text = "[" + text + "]";
      width = std::max(width, text.size());
      cells[static_cast<size_t>(r)].push_back(std::move(text));
    }
  }
  const std::string last_label = fmt::format("rank {}", rows == 0 ? 0 : rows - 1);
  const size_t label_width = std::max(last_label.size(), std::string("step").size());

  std::string out;
  std::string line = fmt::format("{:<{}} |", "step", label_width);
  for (size_t k = 0; k < steps; ++k) line += fmt::format(" {:<{}}", k, width);
  trim_right(line);
  out += line + "\n";
  for (int r = 0; r < rows; ++r) {
    line = fmt::format("{:<{}} |", fmt::format("rank {}", r), label_width);
    for (const std::string& text : cells[static_cast<size_t>(r)]) line += fmt::format(" {:<{}}", text, width);
    trim_right(line);
    out += line + "\n";
  }
  return out;
}

}  // namespace pw
