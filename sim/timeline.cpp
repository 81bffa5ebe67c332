#include "sim/timeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"

namespace pw {
namespace {

char letter(Op op) {
  switch (op) {
    case Op::F: return 'F';
    case Op::B: return 'B';
    case Op::W: return 'W';
    case Op::BW: return 'b';
    case Op::FB: return 'X';
    default: return '?';
  }
}

const char* ansi_colour(Op op) {
  switch (op) {
    case Op::F: return "\x1b[34m";   // blue
    case Op::B: return "\x1b[32m";   // green
    case Op::W: return "\x1b[33m";   // yellow
    case Op::BW: return "\x1b[35m";  // magenta
    case Op::FB: return "\x1b[36m";  // cyan
    default: return "";
  }
}

// The column's winner so far: the action with the most time in the slice (the first one on a tie).
struct Cell {
  double busy = 0;  // all compute time in the slice
  double best = 0;
  const SimEvent* event = nullptr;
};

// Axis labels at the start, the middle and the end of the row, each where it fits.
std::string axis(int width, double step_time_s) {
  std::string line(static_cast<std::size_t>(width), ' ');
  auto put = [&](int col, const std::string& text) {
    if (col < 0 || col + static_cast<int>(text.size()) > width) return false;
    for (std::size_t i = 0; i < text.size(); ++i)
      if (line[static_cast<std::size_t>(col) + i] != ' ' ||
          (col + static_cast<int>(i) + 1 < width && line[static_cast<std::size_t>(col) + i + 1] != ' '))
        return false;
    std::copy(text.begin(), text.end(), line.begin() + col);
    return true;
  };
  const std::string end = format_seconds(step_time_s);
  put(0, "0");
  put(width - static_cast<int>(end.size()), end);
  put(width / 2, format_seconds(step_time_s / 2));
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

}  // namespace

std::string render_timeline(const std::vector<SimEvent>& events, int ranks, double step_time_s, int width,
                            bool color) {
  if (width < 10) throw_bad_input("timeline width {}: give at least 10 columns", width);
  if (!(step_time_s > 0)) throw_bad_input("timeline: step time {} s; there is nothing to draw", step_time_s);
  const double slice = step_time_s / width;
  std::vector<std::vector<Cell>> grid(static_cast<std::size_t>(std::max(ranks, 0)),
                                      std::vector<Cell>(static_cast<std::size_t>(width)));
  for (const SimEvent& e : events) {
    if (e.lane != Lane::Compute || e.rank < 0 || e.rank >= ranks || !(e.end_s > e.start_s)) continue;
    const int first = std::clamp(static_cast<int>(std::floor(e.start_s / slice)), 0, width - 1);
    const int last = std::clamp(static_cast<int>(std::ceil(e.end_s / slice)) - 1, first, width - 1);
    auto& row = grid[static_cast<std::size_t>(e.rank)];
    for (int c = first; c <= last; ++c) {
      const double overlap = std::min(e.end_s, (c + 1) * slice) - std::max(e.start_s, c * slice);
      if (overlap <= 0) continue;
      Cell& cell = row[static_cast<std::size_t>(c)];
      cell.busy += overlap;
      if (overlap > cell.best) {
        cell.best = overlap;
        cell.event = &e;
      }
    }
  }

  const std::string last_label = fmt::format("{}", std::max(ranks - 1, 0));
  const int digits = static_cast<int>(last_label.size());
  std::string out;
  for (int r = 0; r < ranks; ++r) {
    out += fmt::format("rank {:>{}} |", r, digits);
    for (const Cell& cell : grid[static_cast<std::size_t>(r)]) {
      const double idle = slice - cell.busy;
      if (!cell.event || idle > cell.best) {
        out += '.';
      } else if (color) {
        out += ansi_colour(cell.event->action.op);
        out += static_cast<char>('0' + cell.event->action.microbatch % 10);
        out += "\x1b[0m";
      } else {
        out += letter(cell.event->action.op);
      }
    }
    out += "|\n";
  }
  const std::string pad(static_cast<std::size_t>(digits) + 7, ' ');  // "rank N |"
  out += pad + axis(width, step_time_s) + "\n";
  if (color)
    out += fmt::format("{}1 column = {}; digits: micro-batch mod 10; {}F{} forward, {}B{} backward (input), {}W{} "
                       "backward (weight), {}BW{} backward (B+W), {}F&BW{} composite; . idle\n",
                       pad, format_seconds(slice), ansi_colour(Op::F), "\x1b[0m", ansi_colour(Op::B), "\x1b[0m",
                       ansi_colour(Op::W), "\x1b[0m", ansi_colour(Op::BW), "\x1b[0m", ansi_colour(Op::FB), "\x1b[0m");
  else
    out += fmt::format("{}1 column = {}; F forward, B backward (input), W backward (weight), b backward (B+W), X "
                       "F&BW composite, . idle\n",
                       pad, format_seconds(slice));
  return out;
}

}  // namespace pw
