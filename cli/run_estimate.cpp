#include "cli/run_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/layer_work.hpp"
#include "core/units.hpp"
#include "executor/runtime.hpp"
#include "schedules/generators.hpp"
#include "sim/simulation_estimate.hpp"

namespace pw {

WorkEstimate run_records_estimate(const Scenario& s, const RunWork& run) {
  const double iterations = static_cast<double>(run.iterations) + run.warmup;
  // Every data-parallel replica records its own actions.
  const double replicas = std::max(1, s.parallel.dp);
  const double actions = simulated_actions(s) * replicas;
  constexpr double kBytesPerAction = 3 * sizeof(SimEvent) + sizeof(MemorySample);
  WorkEstimate e;
  e.work = fmt::format("{} iterations x {} actions{} (--iterations {} + --warmup {})",
                       format_count(iterations), format_count(actions),
                       replicas > 1 ? fmt::format(" of {} replicas", s.parallel.dp) : "", run.iterations, run.warmup);
  e.bytes = iterations * actions * kBytesPerAction;
  e.fix = replicas > 1 ? "lower --iterations or --dp" : "lower --iterations";
  return e;
}

WorkEstimate cpu_tensors_estimate(const Scenario& s, const RunWork& run) {
  // What the CPU backend keeps, whichever accounting the scenario predicts with.
  Workload cpu = s.workload;
  cpu.memory = MemoryAccounting::CpuFloat32;
  // Each data-parallel replica holds its own copy, the routed experts split over ep of them.
  double parameters = 0, activations = 0;
  for (const Layer& layer : s.model.layers) {
    const LayerWork w = layer_work(s.model, layer, cpu);
    parameters += w.parameters;
    activations += w.activation_bytes + w.weight_grad_bytes;  // F's for B, and B's for W beside it
  }
  const double replicas = std::max(1, s.parallel.dp);
  const int stages = s.parallel.pp * chunks_per_rank(s.schedule, s.parallel.vpp);
  const double in_flight = std::min(s.parallel.microbatches, stages);
  const double per_parameter = 4.0 * (run.adam ? 4 : 2);
  WorkEstimate e;
  e.work = fmt::format("the cpu backend's float32 tensors for the {} parameters of {} ({} each with {}) and {} "
                       "micro-batch{} of activations{}",
                       format_count(parameters), s.model.name, format_bytes(per_parameter),
                       run.adam ? "adam" : "sgd", in_flight, in_flight == 1 ? "" : "es",
                       replicas > 1 ? fmt::format(", in each of {} replicas", s.parallel.dp) : "");
  e.bytes = replicas * (parameters * per_parameter + activations * in_flight);
  e.fix = replicas > 1 ? "run a smaller model or fewer --dp replicas, use --compute sleep"
                       : "run a smaller model, use --compute sleep";
  return e;
}

std::vector<WorkEstimate> run_estimate(const Scenario& s, const RunWork& run, const SimulationSource& source) {
  std::vector<WorkEstimate> parts{simulation_estimate(s, source), run_records_estimate(s, run)};
  if (run.cpu_tensors) parts.push_back(cpu_tensors_estimate(s, run));
  return parts;
}

}  // namespace pw
