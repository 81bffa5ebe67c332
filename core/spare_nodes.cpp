#include "core/spare_nodes.hpp"

#include <cmath>

#include "core/error.hpp"

namespace pw {

double mean_nodes_down(const SparePool& pool) {
  if (!(pool.mtbf_per_gpu_s > 0)) return 0;
  return pool.nodes * pool.gpus_per_node / pool.mtbf_per_gpu_s * pool.repair_s;
}

double poisson_pmf(double mu, int d) {
  if (d < 0) return 0;
  if (mu <= 0) return d == 0 ? 1.0 : 0.0;
  return std::exp(d * std::log(mu) - mu - std::lgamma(d + 1.0));
}

SpareOutcome with_spares(const SparePool& pool, int spares, const std::vector<double>& throughput) {
  const int n = static_cast<int>(throughput.size());
  if (spares < 0 || spares >= n)
    throw_bad_input("--spares: {} spare nodes need templates for 0 to {} nodes out; there are {}", spares, spares, n);
  const double mu = mean_nodes_down(pool);
  SpareOutcome out;
  double covered = 0;
  for (int d = 0; d < n; ++d) {
    const double p = poisson_pmf(mu, d);
    covered += p;
    out.expected_tokens_per_s += p * throughput[static_cast<size_t>(d > spares ? d : spares)];
    if (d > spares) out.short_probability += p;
  }
  const double tail = std::max(0.0, 1 - covered);
  out.expected_tokens_per_s += tail * throughput.back();
  out.short_probability += tail;
  return out;
}

int templates_needed(const SparePool& pool, int max_spares, double tail) {
  const double mu = mean_nodes_down(pool);
  double covered = 0;
  int d = 0;
  for (; d < pool.nodes; ++d) {
    covered += poisson_pmf(mu, d);
    if (d >= max_spares && 1 - covered < tail) break;
  }
  return std::min(d + 1, pool.nodes);
}

}  // namespace pw
