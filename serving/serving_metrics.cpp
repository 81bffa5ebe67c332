#include "serving/serving_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

namespace {

// np.percentile's default ("linear"): the position (n - 1) p / 100 in the sorted values, split into the index
// below it and the fraction of the way to the next.
std::pair<size_t, double> percentile_position(double n, double p) {
  const double h = (n - 1) * p / 100;
  const double below = std::floor(h);
  return {static_cast<size_t>(below), h - below};
}

}  // namespace

double percentile_of(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto [k, f] = percentile_position(static_cast<double>(values.size()), p);
  if (k + 1 >= values.size()) return values.back();
  return values[k] + f * (values[k + 1] - values[k]);
}

std::vector<double> percentiles_from_string(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    double p = 0;
    size_t used = 0;
    try {
      p = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !(p > 0 && p <= 100))
      throw_bad_input("--percentiles: '{}' is not a percentile in (0, 100]; give them comma-separated, e.g. 90,95", item);
    out.push_back(p);
  }
  if (out.empty()) throw_bad_input("--percentiles: give at least one, comma-separated, e.g. 90,95");
  if (out.size() > 16) throw_bad_input("--percentiles: {} given; at most 16", out.size());
  return out;
}

std::string percentile_text(double p) { return fmt::format("{:g}", p); }

namespace {

LatencyStats stats_of(std::vector<double> values, const std::vector<double>& percentiles) {
  LatencyStats s;
  s.defined = !values.empty();
  if (!s.defined) {
    s.at_s.assign(percentiles.size(), 0);
    return s;
  }
  s.mean_s = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  std::sort(values.begin(), values.end());
  for (double p : percentiles) s.at_s.push_back(percentile_of(values, p));
  return s;
}

// The same over values given with their counts (settled: sorted by value, each value once).
LatencyStats stats_of(const GapCounts& counted, const std::vector<double>& percentiles) {
  if (!counted.settled()) throw_runtime("serving metrics: the token gaps were read before they were settled");
  LatencyStats s;
  double n = 0, sum = 0;
  for (const auto& [v, c] : counted) {
    n += static_cast<double>(c);
    sum += v * static_cast<double>(c);
  }
  s.defined = n > 0;
  if (!s.defined) {
    s.at_s.assign(percentiles.size(), 0);
    return s;
  }
  s.mean_s = sum / n;
  // The value at `index` of the sorted list the counts stand for (the last for an index past it).
  const auto value_at = [&](double index) {
    double seen = 0;
    for (const auto& [v, c] : counted)
      if ((seen += static_cast<double>(c)) > index) return v;
    return std::prev(counted.end())->first;
  };
  for (double p : percentiles) {
    const auto [k, f] = percentile_position(n, p);
    const double below = value_at(static_cast<double>(k));
    s.at_s.push_back(below + f * (value_at(static_cast<double>(k + 1)) - below));
  }
  return s;
}

}  // namespace

ServingMetrics serving_metrics(const ServingResult& r, const std::vector<double>& more) {
  ServingMetrics m;
  m.percentiles = {50, 99};
  m.percentiles.insert(m.percentiles.end(), more.begin(), more.end());
  std::sort(m.percentiles.begin(), m.percentiles.end());
  m.percentiles.erase(std::unique(m.percentiles.begin(), m.percentiles.end()), m.percentiles.end());
  std::vector<double> ttft, tpot, e2el;
  double output = 0, input = 0;
  for (const ServedRequest& q : r.requests) {
    output += static_cast<double>(q.output_tokens);
    input += static_cast<double>(q.prompt_tokens);
    ttft.push_back(q.first_token_s - q.arrival_s);
    e2el.push_back(q.last_token_s - q.arrival_s);
    if (q.output_tokens > 1) tpot.push_back((q.last_token_s - q.first_token_s) / static_cast<double>(q.output_tokens - 1));
  }
  if (r.makespan_s > 0) {
    m.output_tokens_per_s = output / r.makespan_s;
    m.input_tokens_per_s = input / r.makespan_s;
    m.total_tokens_per_s = (input + output) / r.makespan_s;
    m.requests_per_s = static_cast<double>(r.requests.size()) / r.makespan_s;
  }
  m.ttft = stats_of(ttft, m.percentiles);
  m.tpot = stats_of(tpot, m.percentiles);
  m.e2el = stats_of(e2el, m.percentiles);
  m.itl = stats_of(r.token_gaps, m.percentiles);
  m.ttft_p50_s = percentile_of(ttft, 50);
  m.ttft_p99_s = percentile_of(ttft, 99);
  m.tpot_p50_s = percentile_of(tpot, 50);
  m.tpot_p99_s = percentile_of(tpot, 99);
  return m;
}

void add_metrics_json(nlohmann::ordered_json& j, const ServingMetrics& m) {
  j["output_tokens_per_s"] = m.output_tokens_per_s;
  j["requests_per_s"] = m.requests_per_s;
  j["input_tokens_per_s"] = m.input_tokens_per_s;
  j["total_tokens_per_s"] = m.total_tokens_per_s;
  for (const auto& [name, stats] : {std::pair<const char*, const LatencyStats*>{"ttft", &m.ttft},
                                    {"tpot", &m.tpot},
                                    {"itl", &m.itl},
                                    {"e2el", &m.e2el}}) {
    // Captured through a variable of its own: clang before 16 cannot capture a structured binding.
    const LatencyStats* const of = stats;
    const auto value = [of](double v) { return of->defined ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); };
    j[fmt::format("{}_mean_s", name)] = value(of->mean_s);
    for (size_t i = 0; i < m.percentiles.size(); ++i)
      j[fmt::format("{}_p{}_s", name, percentile_text(m.percentiles[i]))] = value(of->at_s[i]);
  }
}

}  // namespace pw
