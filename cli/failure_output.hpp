#pragma once
// What `plan --fail` and `replan` print about the plans on what a failure leaves.
#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

#include "core/cost_model.hpp"
#include "planner/failure_report.hpp"

namespace pw {

// The heading, the plan table on what is left (or why nothing fits) and one line on what the failure costs.
void print_after_failure(std::ostream& out, const std::string& heading, const AfterFailure& after, const CostModel& cost,
                         int threads);
// {"gpus_left", "gpus_used", "throughput_lost", "gpus_lost", "changes", "plans"}, or {"gpus_left", "verdict"}.
nlohmann::ordered_json after_failure_json(const AfterFailure& after, const CostModel& cost, int threads);

}  // namespace pw
