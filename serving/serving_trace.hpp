#pragma once
// A serving run's batches on each pipeline stage as a Chrome / Perfetto trace: one thread per stage, one span
// per batch (its tokens in the name), times in microseconds.
#include <nlohmann/json.hpp>

#include "serving/serving_sim.hpp"

namespace pw {

// `result` from a simulation with ServingConfig::record_spans; `other_data` lands in "otherData".
nlohmann::json serving_trace(const ServingResult& result, int stages, nlohmann::json other_data = nlohmann::json::object());

}  // namespace pw
