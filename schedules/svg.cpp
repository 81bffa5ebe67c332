#include "schedules/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"

namespace pw {

namespace {

constexpr int kLabelWidth = 64;  // "rank 12" column
constexpr int kRowHeight = 26;
constexpr int kRowGap = 4;
constexpr int kMargin = 12;
constexpr int kTitleHeight = 24;
constexpr int kAxisHeight = 30;
constexpr int kLegendHeight = 40;

struct Rgb {
  int r, g, b;
};

Rgb base_colour(Op op) {
  switch (op) {
    case Op::F: return {78, 121, 167};    // blue
    case Op::B: return {89, 161, 79};     // green
    case Op::W: return {237, 201, 72};    // yellow
    case Op::BW: return {176, 122, 161};  // purple
    case Op::FB: return {118, 183, 178};  // teal
    default: return {160, 160, 160};
  }
}

// A later chunk of the same rank is drawn 45% of the way to white, so that the two halves of a V or
// the rounds of an interleaved schedule can be told apart.
std::string colour(Op op, int chunk) {
  Rgb c = base_colour(op);
  if (chunk > 0) {
    auto lighten = [](int v) { return v + (255 - v) * 45 / 100; };
    c = {lighten(c.r), lighten(c.g), lighten(c.b)};
  }
  return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
}

const char* op_name(Op op) {
  switch (op) {
    case Op::F: return "F";
    case Op::B: return "B";
    case Op::W: return "W";
    case Op::BW: return "BW";
    case Op::FB: return "F&B";
    default: return "?";
  }
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A round tick spacing (1, 2 or 5 times a power of ten) giving about `target` ticks over the span.
double tick_step(double span, int target) {
  const double raw = span / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double mult : {1.0, 2.0, 5.0})
    if (raw <= mult * power) return mult * power;
  return 10 * power;
}

// Index of each stage among its rank's stages in ascending order: 0 for the first chunk.
std::vector<int> chunk_of_stage(const Placement& placement) {
  std::vector<int> chunk(static_cast<size_t>(placement.stages()), 0);
  std::vector<int> seen(static_cast<size_t>(placement.ranks), 0);
  for (int s = 0; s < placement.stages(); ++s)
    chunk[static_cast<size_t>(s)] = seen[static_cast<size_t>(placement.rank_of(s))]++;
  return chunk;
}

}  // namespace

std::string schedule_svg(const std::vector<TimedAction>& boxes, const Placement& placement, double span_s,
                         const SvgOptions& options) {
  if (!(span_s > 0)) throw_bad_input("svg: the time span must be positive, got {}", span_s);
  if (options.width_px < 200) throw_bad_input("svg: width must be at least 200 pixels, got {}", options.width_px);
  const int ranks = placement.ranks;
  const std::vector<int> chunk = chunk_of_stage(placement);
  const int top = kMargin + (options.title.empty() ? 0 : kTitleHeight);
  const int plot_left = kMargin + kLabelWidth;
  const double plot_width = options.width_px - plot_left - kMargin;
  const int rows_height = ranks * (kRowHeight + kRowGap);
  const int height = top + rows_height + kAxisHeight + kLegendHeight + kMargin;
  auto x_of = [&](double t) { return plot_left + t / span_s * plot_width; };
  auto y_of = [&](int rank) { return top + rank * (kRowHeight + kRowGap); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      options.width_px, height);
  if (!options.title.empty())
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", kMargin,
                       kMargin + 14, escape(options.title));

  // Rows: a label and a thin frame, so that idle time reads as empty space.
  for (int r = 0; r < ranks; ++r) {
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" dominant-baseline=\"middle\">rank {}</text>\n", kMargin,
                       y_of(r) + kRowHeight / 2.0, r);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"none\" stroke=\"#d0d0d0\" "
        "stroke-width=\"0.5\"/>\n",
        plot_left, y_of(r), plot_width, kRowHeight);
  }

  for (const TimedAction& box : boxes) {
    const Action& a = box.action;
    if (!is_compute(a.op)) continue;
    if (box.rank < 0 || box.rank >= ranks)
      throw_bad_input("svg: an action on rank {}, but the placement has {} ranks", box.rank, ranks);
    if (a.stage < 0 || a.stage >= placement.stages())
      throw_bad_input("svg: action '{}' names stage {}, but the placement has {} stages", to_text(a), a.stage,
                      placement.stages());
    const double x = x_of(box.start_s), w = std::max(0.5, x_of(box.end_s) - x);
    const std::string label =
        a.op == Op::FB ? fmt::format("{}/{}", a.microbatch, a.microbatch2) : fmt::format("{}", a.microbatch);
    svg += fmt::format("<g><title>rank {}: {} ({}, stage {}) {} to {}</title>", box.rank, to_text(a), op_name(a.op),
                       a.stage, format_seconds(box.start_s), format_seconds(box.end_s));
    svg += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" stroke=\"white\" "
        "stroke-width=\"0.5\"/>",
        x, y_of(box.rank) + 1, w, kRowHeight - 2, colour(a.op, chunk[static_cast<size_t>(a.stage)]));
    // About 7 pixels per character at 11 px.
    if (w >= 7.0 * label.size() + 2)
      svg +=
          fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\" dominant-baseline=\"middle\">{}</text>",
                      x + w / 2, y_of(box.rank) + kRowHeight / 2.0, label);
    svg += "</g>\n";
  }

  // Time axis with round ticks.
  const int axis_y = top + rows_height;
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\" stroke=\"black\" stroke-width=\"0.8\"/>\n",
                     plot_left, axis_y, plot_left + plot_width, axis_y);
  const double step = tick_step(span_s, 8);
  for (int i = 0; i * step <= span_s * (1 + 1e-9); ++i) {
    const double t = i * step, x = x_of(t);
    svg += fmt::format(
        "<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"black\" stroke-width=\"0.8\"/>"
        "<text x=\"{0:.2f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        x, axis_y, axis_y + 4, axis_y + 16, i == 0 ? std::string("0") : format_seconds(t));
  }

  // Legend.
  int lx = plot_left;
  const int ly = axis_y + kAxisHeight;
  for (const Op op : {Op::F, Op::B, Op::W, Op::BW, Op::FB}) {
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"{}\"/>", lx, ly, colour(op, 0));
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", lx + 18, ly + 10, escape(op_name(op)));
    lx += 60;
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" fill=\"#555555\">lighter: a rank's later chunks; label: micro-batch; empty: "
      "idle</text>\n",
      plot_left, ly + 28);
  svg += "</svg>\n";
  return svg;
}

std::vector<TimedAction> timed_actions(const Schedule& s, const ScheduleTiming& timing) {
  std::vector<TimedAction> out;
  for (size_t r = 0; r < s.ranks.size(); ++r)
    for (size_t k = 0; k < s.ranks[r].size(); ++k)
      if (is_compute(s.ranks[r][k].op))
        out.push_back(TimedAction{static_cast<int>(r), s.ranks[r][k], timing.start[r][k], timing.end[r][k]});
  return out;
}

}  // namespace pw
