#pragma once
// The run-overhead fit: the costs an executor adds to the layers' own times, fitted so that the simulated
// runs match the measured ones. Compute terms (compute_scale, dispatch_s and, from traces,
// transfer_slowdown) by non-negative least squares on per-rank busy times, or per-action times where a
// trace is given; then transfer_s by a one-dimensional search on the simulated step times.
#include <string>
#include <vector>

#include "calibrate/calibration.hpp"
#include "calibrate/run_record.hpp"
#include "core/cost_model.hpp"

namespace pw {

// The run's step time simulated with `cost`: its scenario, its layer ranges, the schedule it executed.
double simulated_step_s(const RunRecord& run, const CostModel& cost);

// `layers` holds the layer, link and optimizer terms (its overheads are ignored); `base` answers for the
// rest. BadInput when the busy times do not grow with the predicted compute (a compute scale of 0).
RunOverheads fit_run_overheads(const Calibration& layers, const std::vector<RunRecord>& runs, const CostModel& base,
                               std::vector<std::string>& warnings);

}  // namespace pw
