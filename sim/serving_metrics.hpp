#pragma once
// What a serving run is judged by: output tokens and requests per second over the run, and the time to the
// first token (TTFT) and per output token after it (TPOT) at the median and the 99th percentile
// (nearest rank), as vLLM's benchmark_serving reports them.
#include <nlohmann/json.hpp>

#include <vector>

#include "sim/serving_sim.hpp"

namespace pw {

struct ServingMetrics {
  double output_tokens_per_s = 0;
  double requests_per_s = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0;
  double tpot_p50_s = 0, tpot_p99_s = 0;  // over requests with more than one output token (0 if none)
};

// The value at percentile p (0 < p <= 100) of `values` by nearest rank; 0 for none.
double nearest_rank(std::vector<double> values, double p);

ServingMetrics serving_metrics(const ServingResult& r);

// Appends output_tokens_per_s, requests_per_s, ttft_p50_s, ttft_p99_s, tpot_p50_s and tpot_p99_s to `j`.
void add_metrics_json(nlohmann::ordered_json& j, const ServingMetrics& m);

}  // namespace pw
