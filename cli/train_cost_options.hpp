#pragma once
// `plan --train-tokens 15T`: how long and how much each plan takes to train that many tokens, failures
// included (core/time_to_train.hpp): --gpu-hour-price, --mtbf-per-gpu (hours; Llama 3 405B's rate by
// default, 0 for none), --checkpoint-write and --restart (seconds).
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/time_to_train.hpp"

namespace pw {

struct TrainCostOptions {
  std::string tokens;  // empty: not asked
  std::optional<double> price;
  double mtbf_per_gpu_hours = kLlama3MtbfPerGpuHours;
  double checkpoint_write_s = TrainingRunSpec{}.checkpoint_write_s;
  double restart_s = TrainingRunSpec{}.restart_s;
  CLI::Option* mtbf_option = nullptr;
  std::vector<CLI::Option*> with_tokens;  // the options that take effect only with --train-tokens
  std::optional<int> spares;  // --spares: the table for 0 .. this many spare nodes
  double repair_hours = 24;   // --repair

  void add_to(CLI::App& cmd);
  // BadInput for --spares without --train-tokens, out of 0 .. run_nodes, or a --repair not positive.
  void check_spares(int run_nodes) const;
  bool asked() const { return !tokens.empty(); }
  // BadInput naming the first of --gpu-hour-price, --mtbf-per-gpu, --checkpoint-write, --restart and --repair
  // given without --train-tokens: its figure would be ignored, out of range or not.
  void check_given_with_tokens() const;
  // The run on `gpus` GPUs; BadInput naming the option for anything malformed (checked before the search).
  TrainingRunSpec spec(int gpus) const;
};

// "12.3 days", "5.2 h", "76.4 min", "60 s": spans from a checkpoint's write to a whole run.
std::string duration_text(double s);
// "15T", "300B", "2.5M": a token count as --train-tokens takes it.
std::string tokens_text(double n);
// "1.23 M" GPU-hours, "4.56 M" of a currency: large counts with their order of magnitude.
std::string count_text(double x);

// One row per plan (its throughput): days, GPU-hours, cost, interruptions, checkpoint interval, goodput,
// with a line saying what was assumed.
void print_train_costs(std::ostream& out, const TrainCostOptions& o, const TrainingRunSpec& spec,
                       const std::vector<double>& tokens_per_s);
nlohmann::ordered_json train_cost_json(const TrainingRunCost& c);

}  // namespace pw
