#include "kernels/table_grid.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace pw {

const char* to_string(TableHow how) {
  switch (how) {
    case TableHow::Measured: return "measured";
    case TableHow::Interpolated: return "interpolated";
    case TableHow::Extrapolated: return "extrapolated";
    case TableHow::Missing: return "missing";
  }
  return "?";
}

namespace {

int column(const KernelTable& t, const std::string& name, bool text) {
  const int k = t.key_index(name);
  if (k < 0) throw_bad_input("{}: no column '{}' in the {} table", t.path(), name, t.kind());
  if (t.key_is_text(k) != text)
    throw_bad_input("{}: column '{}' holds {}, not {}", t.path(), name, t.key_is_text(k) ? "text" : "numbers",
                    text ? "text" : "numbers");
  return k;
}

// One axis of a lookup: the measured values used and their weights, and a factor on the time.
struct AxisPlan {
  std::vector<size_t> index;  // 1 or 2 positions in the axis's values
  std::vector<double> weight;
  double scale = 1;
  bool extrapolated = false;
};

}  // namespace

TableGrid::TableGrid(const KernelTable& table, const Select& select, std::vector<std::string> axes, const std::string& time)
    : axes_(std::move(axes)) {
  what_ = table.kind();
  std::vector<std::pair<int, int>> text;  // key, dictionary id wanted
  std::string selected;
  for (const auto& [name, value] : select.text) {
    const int k = column(table, name, true);
    const auto& dict = table.text_values(k);
    const auto it = std::find(dict.begin(), dict.end(), value);
    text.emplace_back(k, it == dict.end() ? -1 : static_cast<int>(it - dict.begin()));
    selected += fmt::format("{}{}={}", selected.empty() ? "" : ", ", name, value);
  }
  std::vector<std::pair<int, double>> exact;
  for (const auto& [name, value] : select.number) {
    exact.emplace_back(column(table, name, false), value);
    selected += fmt::format("{}{}={:g}", selected.empty() ? "" : ", ", name, value);
  }
  for (const auto& [name, value] : select.number_if_present) {
    if (table.key_index(name) < 0) continue;
    exact.emplace_back(column(table, name, false), value);
    selected += fmt::format("{}{}={:g}", selected.empty() ? "" : ", ", name, value);
  }
  struct RatioColumns {
    int numerator, denominator;
    double value;
  };
  std::vector<RatioColumns> ratios;
  for (const Select::Ratio& r : select.ratio) {
    ratios.push_back({column(table, r.numerator, false), column(table, r.denominator, false), r.value});
    selected += fmt::format("{}{}/{}={:g}", selected.empty() ? "" : ", ", r.numerator, r.denominator, r.value);
  }
  if (!selected.empty()) what_ += " (" + selected + ")";
  std::vector<int> axis_keys;
  for (const std::string& a : axes_) axis_keys.push_back(column(table, a, false));
  const int t = table.time_index(time);
  if (t < 0) throw_bad_input("{}: no time column '{}' in the {} table", table.path(), time, table.kind());
  values_.assign(axes_.size(), {});
  for (long r = 0; r < table.rows(); ++r) {
    bool match = true;
    for (const auto& [k, id] : text)
      if (id < 0 || table.text(k, r) != table.text_values(k)[static_cast<size_t>(id)]) match = false;
    for (const auto& [k, v] : exact)
      if (table.number(k, r) != v) match = false;
    for (const RatioColumns& q : ratios)
      if (table.number(q.numerator, r) != q.value * table.number(q.denominator, r)) match = false;
    if (!match) continue;
    std::vector<double> point;
    for (int k : axis_keys) point.push_back(table.number(k, r));
    // A shape measured twice (two kernels of one source, a repeated sweep): the faster time, as an engine's
    // dispatcher would pick.
    const double s = table.seconds(t, r);
    auto [it, added] = times_.emplace(point, s);
    if (!added) it->second = std::min(it->second, s);
  }
  for (const auto& [point, s] : times_)
    for (size_t a = 0; a < point.size(); ++a) values_[a].push_back(point[a]);
  for (auto& v : values_) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
}

TableTime TableGrid::at(const std::vector<double>& q) const {
  TableTime out;
  if (times_.empty()) {
    out.note = fmt::format("{}: no measured rows", what_);
    return out;
  }
  if (q.size() != axes_.size()) throw_runtime("{}: {} values for {} axes", what_, q.size(), axes_.size());
  std::vector<AxisPlan> plan(axes_.size());
  bool interpolated = false, extrapolated = false;
  for (size_t a = 0; a < axes_.size(); ++a) {
    const std::vector<double>& v = values_[a];
    const double x = q[a];
    AxisPlan& p = plan[a];
    const auto hi = std::lower_bound(v.begin(), v.end(), x);
    if (hi != v.end() && *hi == x) {
      p.index = {static_cast<size_t>(hi - v.begin())};
      p.weight = {1};
      continue;
    }
    if (!(x > 0)) {
      out.note = fmt::format("{}: {} {:g} is not positive", what_, axes_[a], x);
      return out;
    }
    if (hi == v.end()) {
      if (x > v.back() * kExtrapolationFactor) {
        out.note = fmt::format("{}: {} {:g} is past the largest measured, {:g}, by more than {:g}x", what_, axes_[a], x,
                               v.back(), kExtrapolationFactor);
        return out;
      }
      p.index = {v.size() - 1};
      p.weight = {1};
      p.scale = x / v.back();
      p.extrapolated = extrapolated = true;
      out.note = fmt::format("{} {:g} past the largest measured, {:g}: time scaled by {:.3g}x", axes_[a], x, v.back(),
                             p.scale);
      continue;
    }
    if (hi == v.begin()) {
      if (x < v.front() / kExtrapolationFactor) {
        out.note = fmt::format("{}: {} {:g} is below the smallest measured, {:g}, by more than {:g}x", what_, axes_[a],
                               x, v.front(), kExtrapolationFactor);
        return out;
      }
      p.index = {0};
      p.weight = {1};
      p.extrapolated = extrapolated = true;
      out.note = fmt::format("{} {:g} below the smallest measured, {:g}: that point's time", axes_[a], x, v.front());
      continue;
    }
    const double lo = *(hi - 1), up = *hi;
    const double w = (std::log(x) - std::log(lo)) / (std::log(up) - std::log(lo));
    p.index = {static_cast<size_t>(hi - v.begin()) - 1, static_cast<size_t>(hi - v.begin())};
    p.weight = {1 - w, w};
    interpolated = true;
  }
  // Every corner of the cell, each with the product of its axes' weights.
  std::vector<std::pair<double, double>> corners;  // weight, time
  std::vector<size_t> choice(axes_.size(), 0);
  std::vector<double> point(axes_.size());
  double scale = 1;
  for (const AxisPlan& p : plan) scale *= p.scale;
  for (;;) {
    double weight = 1;
    for (size_t a = 0; a < axes_.size(); ++a) {
      point[a] = values_[a][plan[a].index[choice[a]]];
      weight *= plan[a].weight[choice[a]];
    }
    const auto it = times_.find(point);
    if (it == times_.end()) {
      std::string shape;
      for (size_t a = 0; a < axes_.size(); ++a) shape += fmt::format("{}{}={:g}", a ? ", " : "", axes_[a], point[a]);
      out.note = fmt::format("{}: the point {} around the shape was never measured", what_, shape);
      return out;
    }
    corners.emplace_back(weight, it->second);
    size_t a = 0;
    while (a < axes_.size() && ++choice[a] == plan[a].index.size()) choice[a++] = 0;
    if (a == axes_.size()) break;
  }
  if (corners.size() == 1) {
    // A measured point (or an edge): its time as measured, not through a logarithm and back.
    out.seconds = corners.front().second * scale;
    out.how = extrapolated ? TableHow::Extrapolated : TableHow::Measured;
    return out;
  }
  // Log-space blend; a corner measured at 0 s (a no-op kernel) has no logarithm: blend linearly then.
  const bool zero = std::any_of(corners.begin(), corners.end(), [](const auto& c) { return c.second <= 0; });
  double blended = 0;
  for (const auto& [w, s] : corners) blended += w * (zero ? s : std::log(s));
  out.seconds = (zero ? blended : std::exp(blended)) * scale;
  out.how = extrapolated ? TableHow::Extrapolated : interpolated ? TableHow::Interpolated : TableHow::Measured;
  if (!extrapolated) out.note.clear();
  return out;
}

}  // namespace pw
