#pragma once
// A measured iteration in the simulator's terms: replayed to any SimObserver, or written as a Chrome trace
// in the schema of sim/chrome_trace.hpp so that the predicted and the measured timelines open side by side.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/stage_costs.hpp"
#include "executor/runtime.hpp"

namespace pw {

// on_start(ranks), every event in start order, every memory change, on_finish(step time).
void replay(const IterationRecord& iteration, SimObserver& observer);

// The simulator's trace schema with measured times. Compute slices carry args.predicted_us (from
// `predicted`, indexed by stage; FB: the F and the BW added, as the simulator charges it) and
// args.measured_us; optimizer steps args.predicted_us (the rank's stages' optimizer_s) and args.measured_us;
// transfers carry args.measured_us only. otherData gets `other_data`, "step_time_s",
// "iteration" and tool "pipewright <version> executor (<backend>)".
nlohmann::json measured_trace(const IterationRecord& iteration, const std::vector<StageCost>& predicted,
                              const std::string& backend, nlohmann::json other_data = nlohmann::json::object());

}  // namespace pw
