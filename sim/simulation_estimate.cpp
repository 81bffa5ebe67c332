#include "sim/simulation_estimate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "schedules/generators.hpp"

namespace pw {
namespace {

int iterations(const Scenario& s) { return s.synchronous_optimizer ? 1 : s.async_iterations; }

}  // namespace

double simulated_actions(const Scenario& s) {
  double per_iteration = 0;
  if (s.imported_schedule) {
    for (const auto& list : s.imported_schedule->ranks) per_iteration += static_cast<double>(list.size());
  } else {
    per_iteration = static_cast<double>(s.parallel.pp) * chunks_per_rank(s.schedule, s.parallel.vpp) *
                    s.parallel.microbatches * 3;
  }
  return per_iteration * iterations(s);
}

WorkEstimate simulation_estimate(const Scenario& s, const SimulationSource& source, const SimulationObservers& observers) {
  const double actions = simulated_actions(s);
  WorkEstimate e;
  const std::string times_iterations =
      iterations(s) > 1 ? fmt::format(" x {} iterations (--no-sync-optimizer)", iterations(s)) : "";
  if (s.imported_schedule) {
    e.work = fmt::format("{} actions (the schedule of {}{})", format_count(actions), source.schedule_file, times_iterations);
    e.fix = "give a schedule with fewer micro-batches";
  } else {
    const int chunks = chunks_per_rank(s.schedule, s.parallel.vpp);
    const std::string microbatches =
        source.global_batch ? fmt::format("{} micro-batches (--global-batch-size {} / (micro-batch size {} x dp {}))",
                                          s.parallel.microbatches, s.global_batch_size, s.workload.micro_batch_size,
                                          s.parallel.dp)
                            : fmt::format("--microbatches {}", s.parallel.microbatches);
    e.work = fmt::format("{} actions (--pp {} x {} chunk{} x {} x 3 for F, B and W{})", format_count(actions), s.parallel.pp,
                         chunks, chunks == 1 ? "" : "s", microbatches, times_iterations);
    e.fix = source.global_batch ? "lower --global-batch-size" : "lower --microbatches";
  }
  double bytes_per_action = kSimBytesPerAction, seconds_per_action = kSimSecondsPerAction;
  if (observers.timeline) {
    bytes_per_action += kTimelineBytesPerAction;
    seconds_per_action += kTimelineSecondsPerAction;
  }
  if (observers.trace) {
    bytes_per_action += kTraceBytesPerAction;
    seconds_per_action += kTraceSecondsPerAction;
    e.fix += ", drop --trace";
  }
  e.bytes = actions * bytes_per_action;
  e.seconds = actions * seconds_per_action;
  return e;
}

}  // namespace pw
