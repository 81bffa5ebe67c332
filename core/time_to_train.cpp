#include "core/time_to_train.hpp"

#include <cmath>
#include <cstdlib>

#include "core/checked_math.hpp"
#include "core/error.hpp"

namespace pw {

double daly_checkpoint_interval(double write_s, double system_mtbf_s) {
  const double d = write_s, m = system_mtbf_s;
  if (d >= 2 * m) return m;
  return std::sqrt(2 * d * m) * (1 + std::sqrt(d / (2 * m)) / 3 + d / (18 * m)) - d;
}

double daly_wall_time(double compute_s, double interval_s, double write_s, double restart_s, double system_mtbf_s) {
  const double m = system_mtbf_s;
  return m * std::exp(restart_s / m) * std::expm1((interval_s + write_s) / m) * compute_s / interval_s;
}

TrainingRunCost training_run_cost(const TrainingRunSpec& spec, double tokens_per_s) {
  if (!(spec.tokens >= 1 && spec.tokens <= kMaxTrainTokens))
    throw_bad_input("--train-tokens: must be a token count from 1 to {:g}, got {:g}", kMaxTrainTokens, spec.tokens);
  if (!(spec.gpus >= 1)) throw_bad_input("--gpus: must be at least 1, got {:g}", spec.gpus);
  if (!(tokens_per_s > 0 && std::isfinite(tokens_per_s)))
    throw_bad_input("throughput: {:g} tokens/s; a plan that trains needs a positive throughput", tokens_per_s);
  const double mtbf_hours = spec.mtbf_per_gpu_s / 3600;
  if (!(mtbf_hours == 0 || (mtbf_hours >= kMtbfPerGpuHoursRange.min && mtbf_hours <= kMtbfPerGpuHoursRange.max)))
    throw_bad_input("--mtbf-per-gpu: must be 0 (no failures) or from {:g} to {:g} hours, got {:g}",
                    kMtbfPerGpuHoursRange.min, kMtbfPerGpuHoursRange.max, mtbf_hours);
  check_in_range("--checkpoint-write", spec.checkpoint_write_s, kCheckpointWriteRange);
  check_in_range("--restart", spec.restart_s, kRestartRange);
  if (spec.price_per_gpu_hour) check_in_range("--gpu-hour-price", *spec.price_per_gpu_hour, kGpuHourPriceRange);
  TrainingRunCost c;
  c.compute_s = spec.tokens / tokens_per_s;
  c.wall_s = c.compute_s;
  if (spec.mtbf_per_gpu_s > 0) {
    const double m = spec.mtbf_per_gpu_s / spec.gpus;
    c.checkpoint_interval_s = daly_checkpoint_interval(spec.checkpoint_write_s, m);
    c.wall_s = daly_wall_time(c.compute_s, c.checkpoint_interval_s, spec.checkpoint_write_s, spec.restart_s, m);
    c.interruptions = c.wall_s / m;
    // Goodput depends on the failure rate, the write and the restart alone: a run that fails faster than it
    // restarts and checkpoints never finishes, whatever its throughput.
    if (!(c.compute_s / c.wall_s >= kMinGoodput))
      throw_bad_input("--mtbf-per-gpu: a failure every {:.3g} s on all {:g} GPUs leaves under {:g}% of the time "
                      "training (restarts of {:g} s, checkpoints of {:g} s); give a longer --mtbf-per-gpu or a "
                      "shorter --restart and --checkpoint-write",
                      m, spec.gpus, kMinGoodput * 100, spec.restart_s, spec.checkpoint_write_s);
  }
  c.goodput = c.compute_s / c.wall_s;
  c.gpu_hours = c.wall_s * spec.gpus / 3600;
  if (spec.price_per_gpu_hour) c.cost = c.gpu_hours * *spec.price_per_gpu_hour;
  return c;
}

double parse_token_count(const std::string& text, const std::string& option) {
  std::string digits;
  for (char ch : text)
    if (ch != ',' && ch != '_') digits += ch;
  double scale = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': scale = 1e3; break;
      case 'M': case 'm': scale = 1e6; break;
      case 'B': case 'b': case 'G': case 'g': scale = 1e9; break;
      case 'T': case 't': scale = 1e12; break;
      default: break;
    }
    if (scale != 1) digits.pop_back();
  }
  char* end = nullptr;
  const double value = digits.empty() ? 0 : std::strtod(digits.c_str(), &end);
  if (digits.empty() || end != digits.c_str() + digits.size() || !(value > 0) || !std::isfinite(value * scale))
    throw_bad_input("{}: '{}' is not a token count; write a positive number with an optional K, M, B or T, such as 15T",
                    option, text);
  return value * scale;
}

}  // namespace pw
