#pragma once
// The JSON of what a simulation predicts, shared by `simulate --json` and plan files, so that the two
// never disagree on a field's name or unit.
#include <nlohmann/json.hpp>

#include "sim/scenario.hpp"

namespace pw {

// rank, busy_s, idle_s, activation_peak_bytes, model_state_bytes, peak_memory_bytes,
// peak_inflight_microbatches.
nlohmann::ordered_json rank_stats_json(const RankStats& r);
// step_time_s, bubble_fraction, tokens_per_iteration, throughput_tokens_per_s, model_tflops_per_gpu,
// hardware_tflops_per_gpu, mfu, hfu, peak_memory_bytes, memory_limit_bytes (null: no limit), fits.
nlohmann::ordered_json metrics_json(const Metrics& m);

}  // namespace pw
