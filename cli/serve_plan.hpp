#pragma once
// `pipewright serve plan`: the serving planner's table (planner/serving_plan.hpp).
#include <CLI/CLI.hpp>

#include <optional>
#include <ostream>

#include "cli/serve_options.hpp"

namespace pw {

struct ServePlanOptions {
  ServeOptions serve;
  int gpus = 0;
  int top = 5;
  std::optional<double> ttft_slo_s, tpot_slo_s;
  double slo_percentile = 99;
  std::optional<double> gpu_hour_price;
  std::string export_target;  // "vllm" or "sglang": print plan 1's command
  bool disaggregate = false;  // also plans with separate prefill and decode pools
  bool allow_large = false;   // --allow-large: past the search's time bound
  bool max_rate = false;      // the highest Poisson rate at which plan 1 meets the SLOs
  std::optional<double> target_rate;  // the fewest GPUs whose plan 1 meets the SLOs at this Poisson rate
  int threads = 0;                    // simulating the configurations; 0: all cores

  void add_to(CLI::App& cmd);
};

void run_serve_plan(const ServePlanOptions& o, std::ostream& out);

}  // namespace pw
