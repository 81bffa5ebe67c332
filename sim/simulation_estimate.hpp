#pragma once
// What simulating a scenario takes, estimated from its counts before anything is built: the simulator
// keeps every action of every rank, and a trace keeps a JSON event for each (measured on gpt3-175b, 1f1b
// and interleaved, 10^4 to 10^5 micro-batches; docs/reliability.md).
#include <string>

#include "core/work_estimate.hpp"
#include "sim/scenario.hpp"

namespace pw {

// Per action simulated (counted as below): the schedule, the simulator's state and its events.
inline constexpr double kSimBytesPerAction = 100;
inline constexpr double kSimSecondsPerAction = 0.5e-6;
// What the observers add per action: --timeline's recorded events, --trace's JSON events.
inline constexpr double kTimelineBytesPerAction = 150;
inline constexpr double kTimelineSecondsPerAction = 0.7e-6;
inline constexpr double kTraceBytesPerAction = 10e3;
inline constexpr double kTraceSecondsPerAction = 80e-6;

// How the user gave what the estimate counts, for its message.
struct SimulationSource {
  bool global_batch = false;   // the micro-batches come from --global-batch-size, not --microbatches
  std::string schedule_file;   // the plan or schedule CSV whose schedule is simulated (imported ones)
};

struct SimulationObservers {
  bool timeline = false;
  bool trace = false;
};

// Actions of one simulation of a resolved scenario: the imported schedule's, or at most F, B and W for
// every micro-batch on every stage (pp x chunks x micro-batches x 3), times the iterations simulated.
double simulated_actions(const Scenario& resolved);

// The simulation's memory and time, e.g. work "3,000,000,000 actions (--pp 1 x 1 chunk x --microbatches
// 1000000000 x 3 for F, B and W)", fix "lower --microbatches".
WorkEstimate simulation_estimate(const Scenario& resolved, const SimulationSource& source,
                                 const SimulationObservers& observers = {});

}  // namespace pw
