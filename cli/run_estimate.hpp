#pragma once
// What `run` takes beyond the simulation of its scenario, estimated before anything is allocated: the
// records it keeps of every iteration, and the tensors the cpu backend allocates for the whole model.
#include <string>
#include <vector>

#include "core/work_estimate.hpp"
#include "sim/scenario.hpp"
#include "sim/simulation_estimate.hpp"

namespace pw {

struct RunWork {
  int iterations = 1;
  int warmup = 0;
  bool cpu_tensors = false;  // the cpu backend computes for real
  bool adam = true;          // two optimizer states per parameter (sgd: none)
};

// Per iteration and rank the executor records each action's event with a send and a receive beside it,
// and a memory sample: work "6 iterations x 120 actions (--iterations 5 + --warmup 1)".
WorkEstimate run_records_estimate(const Scenario& resolved, const RunWork& run);

// float32 weights, gradients and optimizer states for every parameter, and what the CPU backend keeps
// (core/kept_bytes.hpp: F's for B and B's for W) of as many micro-batches as there are stages in
// flight, whichever memory accounting `resolved` predicts with.
WorkEstimate cpu_tensors_estimate(const Scenario& resolved, const RunWork& run);

// The parts that apply: the simulation of the scenario, the records, and the tensors when the cpu backend
// computes.
std::vector<WorkEstimate> run_estimate(const Scenario& resolved, const RunWork& run, const SimulationSource& source);

}  // namespace pw
