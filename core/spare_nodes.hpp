#pragma once
// How many spare nodes to hold back (Oobleck's question, Jang et al., SOSP 2023): the run trains on the pool
// less its spares; a node that fails is repaired in a fixed time; while no more nodes are down than there
// are spares the run keeps its plan, otherwise it runs on the plan for the nodes it has (a template, as
// Oobleck precomputes them). Failures are independent and exponential, so the nodes down at a random
// moment are Poisson with mean mu = pool nodes x GPUs per node / per-GPU MTBF x repair time (Little's law
// for an M/G/infinity queue), and the expected throughput with S spares is
//   E_S = sum over d of P(D = d) x T(max(d, S))
// T(k) the template's throughput with k nodes out of the pool.
#include <vector>

namespace pw {

struct SparePool {
  int nodes = 0;             // in the pool, spares included
  int gpus_per_node = 8;
  double mtbf_per_gpu_s = 0; // 0: no failures
  double repair_s = 0;       // from a node's failure to its return
};

// mu: the mean number of nodes down.
double mean_nodes_down(const SparePool& pool);
// P(D = d) for the Poisson mean mu.
double poisson_pmf(double mu, int d);

struct SpareOutcome {
  double expected_tokens_per_s = 0;  // E_S
  double short_probability = 0;      // P(D > S): the run on fewer GPUs than its plan's
};

// `throughput[k]`: the template's tokens/s with k nodes out (k = 0 .. n - 1; 0 where nothing fits). Beyond the
// last template its throughput is assumed (the caller covers the tail it cares about). BadInput for spares
// outside the templates.
SpareOutcome with_spares(const SparePool& pool, int spares, const std::vector<double>& throughput);

// The templates needed for spares up to `max_spares`: enough that P(D > count - 1) < tail.
int templates_needed(const SparePool& pool, int max_spares, double tail = 1e-4);

}  // namespace pw
