#include "cli/train_cost_options.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "cli/duration_option.hpp"
#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/units.hpp"

namespace pw {

std::string duration_text(double s) {
  if (s >= 1e6 * 86400) return fmt::format("{:.3g} days", s / 86400);  // no 20-digit figure
  if (s >= 2 * 86400) return fmt::format("{:.1f} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.1f} h", s / 3600);
  if (s >= 120) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.0f} s", s);
}

std::string tokens_text(double n) {
  for (const auto& [scale, suffix] : {std::pair{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}})
    if (n >= scale) return fmt::format("{:g}{}", n / scale, suffix);
  return fmt::format("{:g}", n);
}

std::string count_text(double x) {
  if (x >= 1e15) return fmt::format("{:.3g}", x);
  if (x >= 1e9) return fmt::format("{:.2f} G", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.2f} M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.1f} k", x / 1e3);
  return fmt::format("{:.0f}", x);
}

void TrainCostOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--train-tokens", tokens, "Tokens to train (e.g. 15T): each plan's days, GPU-hours and failures");
  with_tokens.push_back(cmd.add_option("--gpu-hour-price", price, "Price of one GPU-hour, for the cost of --train-tokens"));
  mtbf_option = as_duration(cmd.add_option("--mtbf-per-gpu", mtbf_per_gpu_hours,
                                           "Mean time between failures per GPU, in hours or with a unit "
                                           "(default Llama 3 405B's: 50,677 h; 0: none)"),
                            3600.0);
  with_tokens.push_back(mtbf_option);
  with_tokens.push_back(as_duration(cmd.add_option("--checkpoint-write", checkpoint_write_s,
                                                   "Time to write one checkpoint (seconds, or with a unit: 90s, 2min)"),
                                    1.0)
                            ->capture_default_str());
  with_tokens.push_back(as_duration(cmd.add_option("--restart", restart_s,
                                                   "Time from a failure to training again (seconds, or with a unit: 10min)"),
                                    1.0)
                            ->capture_default_str());
  cmd.add_option("--spares", spares,
                 "With --train-tokens: goodput and cost for 0 to this many spare nodes held beside the run");
  with_tokens.push_back(as_duration(cmd.add_option("--repair", repair_hours,
                                                   "Time until a failed node is back, for --spares (hours, or with a unit: 2d)"),
                                    3600.0)
                            ->capture_default_str());
}

void TrainCostOptions::check_given_with_tokens() const {
  if (asked()) return;
  for (const CLI::Option* o : with_tokens)
    if (o->count() > 0)
      throw_bad_input("{}: takes effect only with --train-tokens; add --train-tokens (e.g. 15T) or leave it out",
                      o->get_name());
}

void TrainCostOptions::check_spares(int run_nodes) const {
  if (!spares) return;
  if (!asked()) throw_bad_input("--spares: give --train-tokens too; the run's length decides what spares are worth");
  if (*spares < 0 || *spares > run_nodes)
    throw_bad_input("--spares: {} spare nodes beside the run's {}; give 0 to {}", *spares, run_nodes, run_nodes);
  check_in_range("--repair", repair_hours, kRepairHoursRange);
}

TrainingRunSpec TrainCostOptions::spec(int gpus) const {
  TrainingRunSpec s;
  s.tokens = parse_token_count(tokens, "--train-tokens");
  s.gpus = gpus;
  s.mtbf_per_gpu_s = mtbf_per_gpu_hours * 3600;
  s.checkpoint_write_s = checkpoint_write_s;
  s.restart_s = restart_s;
  s.price_per_gpu_hour = price;
  training_run_cost(s, 1.0);  // every figure checked before the search
  return s;
}

void print_train_costs(std::ostream& out, const TrainCostOptions& o, const TrainingRunSpec& spec,
                       const std::vector<double>& tokens_per_s) {
  const bool failures = spec.mtbf_per_gpu_s > 0;
  out << fmt::format("\ntime to train {} tokens on {:.0f} GPUs", tokens_text(spec.tokens), spec.gpus);
  if (failures)
    out << fmt::format(":\na failure every {} of GPU time ({}), so one every {} on all of them; a checkpoint takes {} "
                       "to write, a restart {}",
                       duration_text(spec.mtbf_per_gpu_s),
                       o.mtbf_option && o.mtbf_option->count() > 0 ? "--mtbf-per-gpu" : "Llama 3 405B's rate",
                       duration_text(spec.mtbf_per_gpu_s / spec.gpus), duration_text(spec.checkpoint_write_s),
                       duration_text(spec.restart_s));
  out << ":\n\n";
  const std::string row = "{:>3}  {:>12}  {:>10}  {:>10}  {:>13}  {:>16}  {:>8}\n";
  out << fmt::format(fmt::runtime(row), "#", "wall time", "GPU-hours", "cost", "interruptions", "checkpoint every",
                     "goodput");
  for (size_t i = 0; i < tokens_per_s.size(); ++i) {
    const TrainingRunCost c = training_run_cost(spec, tokens_per_s[i]);
    out << fmt::format(fmt::runtime(row), i + 1, duration_text(c.wall_s), count_text(c.gpu_hours),
                       c.cost ? count_text(*c.cost) : "-", failures ? fmt::format("{:.0f}", c.interruptions) : "-",
                       failures ? duration_text(c.checkpoint_interval_s) : "-", format_percent(c.goodput));
  }
  out << "\nwall time: the tokens at the plan's throughput, plus checkpoints, restarts and the work redone after\n"
         "each failure, checkpointing at the interval that minimises it (J. T. Daly, FGCS 2006), a failed node\n"
         "replaced at once by a spare beside the run (--spares: what holding them costs and what too few cost);\n"
         "goodput: the share of it spent training; cost: GPU-hours x --gpu-hour-price.\n";
}

nlohmann::ordered_json train_cost_json(const TrainingRunCost& c) {
  nlohmann::ordered_json j = {{"compute_s", c.compute_s},
                              {"wall_s", c.wall_s},
                              {"gpu_hours", c.gpu_hours},
                              {"interruptions", c.interruptions},
                              {"checkpoint_interval_s", c.checkpoint_interval_s},
                              {"goodput", c.goodput}};
  if (c.cost) j["cost"] = *c.cost;
  return j;
}

}  // namespace pw
