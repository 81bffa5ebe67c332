#include "sim/serving_metrics.hpp"

#include <algorithm>
#include <cmath>

namespace pw {

double nearest_rank(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

ServingMetrics serving_metrics(const ServingResult& r) {
  ServingMetrics m;
  std::vector<double> ttft, tpot;
  double tokens = 0;
  for (const ServedRequest& q : r.requests) {
    tokens += static_cast<double>(q.output_tokens);
    ttft.push_back(q.first_token_s - q.arrival_s);
    if (q.output_tokens > 1) tpot.push_back((q.last_token_s - q.first_token_s) / static_cast<double>(q.output_tokens - 1));
  }
  if (r.makespan_s > 0) {
    m.output_tokens_per_s = tokens / r.makespan_s;
    m.requests_per_s = static_cast<double>(r.requests.size()) / r.makespan_s;
  }
  m.ttft_p50_s = nearest_rank(ttft, 50);
  m.ttft_p99_s = nearest_rank(ttft, 99);
  m.tpot_p50_s = nearest_rank(tpot, 50);
  m.tpot_p99_s = nearest_rank(tpot, 99);
  return m;
}

void add_metrics_json(nlohmann::ordered_json& j, const ServingMetrics& m) {
  j["output_tokens_per_s"] = m.output_tokens_per_s;
  j["requests_per_s"] = m.requests_per_s;
  j["ttft_p50_s"] = m.ttft_p50_s;
  j["ttft_p99_s"] = m.ttft_p99_s;
  j["tpot_p50_s"] = m.tpot_p50_s;
  j["tpot_p99_s"] = m.tpot_p99_s;
}

}  // namespace pw
