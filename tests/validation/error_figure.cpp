#include "error_figure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace {

constexpr double kPanelW = 300, kPanelH = 200, kLeft = 50, kTop = 40, kGapX = 45, kGapY = 70;
constexpr double kMaxError = 0.35;  // the y axis spans -35% .. +35%; a larger error sits on the edge

struct Axis {
  std::string title;
  double lo, hi;                    // in the axis' own units (log2 / log10 already applied)
  std::vector<std::pair<double, std::string>> ticks;
};

double panel_x(int panel) { return kLeft + (panel % 3) * (kPanelW + kGapX); }
double panel_y(int panel) { return kTop + (panel / 3) * (kPanelH + kGapY); }

double y_of(int panel, double error) {
  const double e = std::clamp(error, -kMaxError, kMaxError);
  return panel_y(panel) + kPanelH / 2 - e / kMaxError * (kPanelH / 2);
}

std::string colour(const std::string& set) {
  static const std::map<std::string, std::string> colours = {
      {"A100", "#1f77b4"}, {"H100 dense", "#2ca02c"}, {"MoE", "#d62728"}};
  const auto it = colours.find(set);
  return it == colours.end() ? "#7f7f7f" : it->second;
}

void frame(std::string& out, int panel, const Axis& axis) {
  const double x0 = panel_x(panel), y0 = panel_y(panel);
  out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="none" stroke="#444"/>)" "\n", x0,
                     y0, kPanelW, kPanelH);
  // The targets' bands: |error| <= 5% (median) and <= 15% (max).
  for (const double band : {0.15, 0.05}) {
    const double top = y_of(panel, band), bottom = y_of(panel, -band);
    out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}" opacity="0.25"/>)" "\n", x0,
                       top, kPanelW, bottom - top, band > 0.1 ? "#dddddd" : "#bbbbbb");
  }
  out += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#444" stroke-dasharray="3,3"/>)" "\n",
                     x0, y_of(panel, 0), x0 + kPanelW, y_of(panel, 0));
  for (const double e : {-0.3, -0.15, 0.0, 0.15, 0.3})
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="end">{:+.0f}%</text>)" "\n", x0 - 4,
                       y_of(panel, e) + 3, 100 * e);
  for (const auto& [at, label] : axis.ticks) {
    const double x = x0 + (at - axis.lo) / (axis.hi - axis.lo) * kPanelW;
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="middle">{}</text>)" "\n", x,
                       y0 + kPanelH + 14, label);
  }
  out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12" text-anchor="middle">{}</text>)" "\n", x0 + kPanelW / 2,
                     y0 + kPanelH + 32, axis.title);
}

void dot(std::string& out, int panel, const Axis& axis, double at, const ErrorPoint& p, int spread) {
  const double x = panel_x(panel) + (std::clamp(at, axis.lo, axis.hi) - axis.lo) / (axis.hi - axis.lo) * kPanelW + spread;
  out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="{}" fill-opacity="0.75"/>)" "\n", x,
                     y_of(panel, p.error), colour(p.set));
}

std::vector<std::pair<double, std::string>> powers_of_two(int hi) {
  std::vector<std::pair<double, std::string>> out;
  for (int v = 1, i = 0; v <= hi; v *= 4, i += 2) out.emplace_back(i, std::to_string(v));
  return out;
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string error_figure_svg(const std::vector<ErrorPoint>& points) {
  const double width = kLeft + 3 * kPanelW + 2 * kGapX + 20, height = kTop + 2 * kPanelH + kGapY + 50;
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" font-family="sans-serif">)" "\n", width,
      height);
  out += fmt::format(R"(<rect width="{:.0f}" height="{:.0f}" fill="white"/>)" "\n", width, height);
  out += fmt::format(R"(<text x="{:.1f}" y="20" font-size="14">Prediction error (predicted / reported - 1) of {} published runs; bands: 5% and 15%</text>)" "\n",
                     kLeft, points.size());
  const Axis size{"model parameters", 9, std::log10(2e12), {{9, "1B"}, {10, "10B"}, {11, "100B"}, {12, "1T"}}};
  const Axis pp{"pipeline ranks (pp)", -0.5, 6.5, powers_of_two(64)};
  const Axis dp{"data-parallel replicas (dp)", -0.5, 8.5, powers_of_two(256)};
  const Axis ep{"expert-parallel degree (ep)", -0.5, 6.5, powers_of_two(64)};
  const Axis precision{"precision", 0, 3, {{1, "bf16"}, {2, "fp8"}}};
  const Axis* axes[] = {&size, &pp, &dp, &ep, &precision};
  for (int i = 0; i < 5; ++i) frame(out, i, *axes[i]);
  for (size_t i = 0; i < points.size(); ++i) {
    const ErrorPoint& p = points[i];
    const int spread = static_cast<int>(i % 5) * 2 - 4;  // runs at one category side by side
    dot(out, 0, size, std::log10(std::max(p.parameters, 1.0)), p, 0);
    dot(out, 1, pp, std::log2(p.pp), p, spread);
    dot(out, 2, dp, std::log2(p.dp), p, spread);
    dot(out, 3, ep, std::log2(p.ep), p, spread);
    dot(out, 4, precision, p.precision == "fp8" ? 2 : 1, p, 3 * spread);
  }
  // The legend in the sixth panel's place.
  const double lx = panel_x(5) + 20, ly = panel_y(5) + 30;
  int row = 0;
  for (const char* set : {"A100", "H100 dense", "MoE"}) {
    int n = 0;
    double worst = 0;
    std::vector<double> abs;
    for (const ErrorPoint& p : points)
      if (p.set == set) {
        ++n;
        abs.push_back(std::fabs(p.error));
        worst = std::max(worst, std::fabs(p.error));
      }
    if (n == 0) continue;
    const double middle = median(abs);
    const double y = ly + 44 * row++;
    out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="{}"/>)" "\n", lx, y, colour(set));
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12">{}: {} runs</text>)" "\n", lx + 12, y + 4, set, n);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12">median |error| {:.1f}%, max {:.1f}%</text>)" "\n",
                       lx + 12, y + 20, 100 * middle, 100 * worst);
  }
  out += "</svg>\n";
  return out;
}
