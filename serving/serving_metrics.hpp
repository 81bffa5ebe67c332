#pragma once
// What a serving run is judged by, as `vllm bench serve` and `sglang.bench_serving` report it: requests, output,
// input and all tokens per second over the run; the time to the first token (TTFT), per output token after it
// (TPOT: (last - first) / (outputs - 1), over requests of two tokens or more), between two tokens (inter-token
// latency, ITL, over every gap) and from arrival to the last token (end-to-end latency, E2EL), each as a mean and
// at percentiles as both clients take them: np.percentile's default, interpolating between the two values either
// side (the median of 10 requests is the mean of the 5th and 6th), the median and p99 always.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "serving/serving_sim.hpp"

namespace pw {

// One latency over the requests: its mean and its value at each asked percentile; `defined` false when no
// request has one (TPOT when every request has a single output token): the JSON says null, the text "-".
struct LatencyStats {
  bool defined = false;
  double mean_s = 0;
  std::vector<double> at_s;  // at ServingMetrics::percentiles, in order
};

struct ServingMetrics {
  double output_tokens_per_s = 0;
  double requests_per_s = 0;
  double input_tokens_per_s = 0;  // the prompts' tokens
  double total_tokens_per_s = 0;  // input and output
  double ttft_p50_s = 0, ttft_p99_s = 0;
  double tpot_p50_s = 0, tpot_p99_s = 0;  // over requests with more than one output token (0 if none)
  std::vector<double> percentiles;        // those of the stats below: 50 and 99, and any more asked
  LatencyStats ttft, tpot, e2el;
  LatencyStats itl;  // over every gap between two tokens of a request (ServingResult::token_gaps)
};

// The percentiles of --percentiles ("90,95"): each in (0, 100], at most 16; BadInput naming the bad one.
std::vector<double> percentiles_from_string(const std::string& text);

// The value at percentile p (0 < p <= 100) of `values` as np.percentile(values, p) gives it: sorted, at
// position (n - 1) p / 100, interpolated linearly between the values either side; 0 for none.
double percentile_of(std::vector<double> values, double p);

// `more` percentiles beside 50 and 99 (sorted, each once).
ServingMetrics serving_metrics(const ServingResult& r, const std::vector<double>& more = {});

// Appends output_tokens_per_s, requests_per_s, input_tokens_per_s, total_tokens_per_s and, for ttft, tpot, itl and
// e2el, <name>_mean_s and <name>_p<P>_s at each percentile (ttft_p50_s, tpot_p99_s, e2el_p90_s, ...) to `j`;
// null for a latency no request has.
void add_metrics_json(nlohmann::ordered_json& j, const ServingMetrics& m);
// "99" for 99, "99.9" for 99.9: a percentile in a key or a column.
std::string percentile_text(double p);

}  // namespace pw
