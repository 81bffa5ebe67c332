#include "core/spare_nodes.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace pw {

double mean_nodes_down(const SparePool& pool) {
  if (!(pool.mtbf_per_gpu_s > 0)) return 0;
  return pool.run_nodes * pool.gpus_per_node / pool.mtbf_per_gpu_s * pool.repair_s;
}

double poisson_pmf(double mu, int d) {
  if (d < 0) return 0;
  if (mu <= 0) return d == 0 ? 1.0 : 0.0;
  return std::exp(d * std::log(mu) - mu - std::lgamma(d + 1.0));
}

SpareOutcome with_spares(const SparePool& pool, int spares, const std::vector<double>& throughput) {
  if (throughput.empty()) throw_runtime("spare nodes: no template, not even the plan's own");
  if (spares < 0) throw_bad_input("--spares: must be 0 or more, got {}", spares);
  const double mu = mean_nodes_down(pool);
  const int n = static_cast<int>(throughput.size());
  SpareOutcome out;
  double covered = 0;
  // Down counts up to the spares and the templates past them; the rest is the tail.
  for (int d = 0; d < spares + n; ++d) {
    const double p = poisson_pmf(mu, d);
    covered += p;
    out.expected_tokens_per_s += p * throughput[static_cast<size_t>(std::max(d - spares, 0))];
    if (d > spares) out.short_probability += p;
  }
  const double tail = std::max(0.0, 1 - covered);
  out.expected_tokens_per_s += tail * throughput.back();
  out.short_probability += tail;
  return out;
}

int templates_needed(const SparePool& pool, double tail) {
  const double mu = mean_nodes_down(pool);
  double covered = 0;
  int d = 0;
  for (; d < pool.run_nodes; ++d) {
    covered += poisson_pmf(mu, d);
    if (1 - covered < tail) break;
  }
  return std::min(d + 1, pool.run_nodes);
}

}  // namespace pw
