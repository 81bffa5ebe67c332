#pragma once
// How many spare nodes to hold beside a run (Oobleck's question, Jang et al., SOSP 2023). The run trains on
// its plan's nodes; spares wait outside it. A node that fails is repaired in a fixed time; while no more of
// the run's nodes are down than there are spares, spares stand in and the run keeps its plan; otherwise it
// runs short, on the plan for the nodes it has (a template, as Oobleck precomputes them). Failures are
// independent and exponential and strike the nodes that train, so the nodes down at a random moment are
// Poisson with mean mu = run nodes x GPUs per node / per-GPU MTBF x repair time (Little's law for an
// M/G/infinity queue), and the expected throughput with S spares is
//   E_S = sum over d of P(D = d) x T(max(d - S, 0))
// T(k) the template's throughput with k nodes short. With spares enough E_S is T(0): the time to train
// that assumes a failed node replaced at once (core/time_to_train.hpp) is the limit of the same sum.
#include <vector>

namespace pw {

struct SparePool {
  int run_nodes = 0;         // the plan's; spares are extra nodes beside them
  int gpus_per_node = 8;
  double mtbf_per_gpu_s = 0; // 0: no failures
  double repair_s = 0;       // from a node's failure to its return
};

// mu: the mean number of the run's nodes down.
double mean_nodes_down(const SparePool& pool);
// P(D = d) for the Poisson mean mu.
double poisson_pmf(double mu, int d);

struct SpareOutcome {
  double expected_tokens_per_s = 0;  // E_S
  double short_probability = 0;      // P(D > S): the run on fewer nodes than its plan's
};

// `throughput[k]`: the template's tokens/s with k nodes short (k = 0 .. n - 1, n >= 1; 0 where nothing fits).
// Beyond the last template its throughput is assumed (templates_needed() makes that tail negligible).
SpareOutcome with_spares(const SparePool& pool, int spares, const std::vector<double>& throughput);

// The templates that leave P(D >= count) below `tail`: what a run without spares can be short of.
int templates_needed(const SparePool& pool, double tail = 1e-4);

}  // namespace pw
