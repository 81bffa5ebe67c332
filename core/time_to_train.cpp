#include "core/time_to_train.hpp"

#include <cmath>
#include <cstdlib>

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
  if (!(spec.tokens > 0 && std::isfinite(spec.tokens)))
    throw_bad_input("--train-tokens: must be a positive token count such as 15T, got {:g}", spec.tokens);
  if (!(spec.gpus >= 1)) throw_bad_input("--gpus: must be at least 1, got {:g}", spec.gpus);
  if (!(tokens_per_s > 0 && std::isfinite(tokens_per_s)))
    throw_bad_input("throughput: {:g} tokens/s; a plan that trains needs a positive throughput", tokens_per_s);
  if (!(spec.mtbf_per_gpu_s >= 0 && std::isfinite(spec.mtbf_per_gpu_s)))
    throw_bad_input("--mtbf-per-gpu: must be 0 (no failures) or a positive number of hours, got {:g}",
                    spec.mtbf_per_gpu_s / 3600);
  if (!(spec.checkpoint_write_s > 0 && std::isfinite(spec.checkpoint_write_s)))
    throw_bad_input("--checkpoint-write: must be a positive number of seconds, got {:g}", spec.checkpoint_write_s);
  if (!(spec.restart_s >= 0 && std::isfinite(spec.restart_s)))
    throw_bad_input("--restart: must be 0 or a positive number of seconds, got {:g}", spec.restart_s);
  if (spec.price_per_gpu_hour && !(*spec.price_per_gpu_hour >= 0 && std::isfinite(*spec.price_per_gpu_hour)))
    throw_bad_input("--gpu-hour-price: must be 0 or a positive price per GPU-hour, got {:g}", *spec.price_per_gpu_hour);
  TrainingRunCost c;
  c.compute_s = spec.tokens / tokens_per_s;
  c.wall_s = c.compute_s;
  if (spec.mtbf_per_gpu_s > 0) {
    const double m = spec.mtbf_per_gpu_s / spec.gpus;
    c.checkpoint_interval_s = daly_checkpoint_interval(spec.checkpoint_write_s, m);
    c.wall_s = daly_wall_time(c.compute_s, c.checkpoint_interval_s, spec.checkpoint_write_s, spec.restart_s, m);
    c.interruptions = c.wall_s / m;
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
