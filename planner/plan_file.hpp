#pragma once
// The plan file: everything needed to run, re-simulate or export one chosen configuration, versioned
// ({"format": "pipewright-plan", "version": 1}; docs/plan-format.md). The model and cluster are embedded,
// so a plan still reads the same after presets change; the schedule's per-rank action lists are written
// out for executors and exporters; the predicted metrics record what pipewright expected.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "sim/scenario.hpp"

namespace pw {

// The measured profile a plan was predicted with (cost_model.profile), so that simulate --plan reads it again.
struct PlanProfile {
  std::string path;     // the profile file, absolute
  std::string tool;     // its writer
  std::string machine;  // where it was measured
};

struct PlanExtras {
  std::string split_method = "best";       // how the layer ranges were chosen
  std::vector<std::string> cost_overrides;  // NAME=VALUE overrides of the analytic cost model
  nlohmann::ordered_json baselines;         // optional: {"uniform": {...}, "parameters": {...}}
  std::optional<PlanProfile> profile;       // the cost model is "profiled" when set
};

// `ev` must be the evaluation of a resolved scenario with explicit ranges (a search plan's).
std::string plan_to_json_text(const Evaluation& ev, const PlanExtras& extras);

struct PlanDocument {
  Scenario scenario;                        // ready for evaluate(): ranges and global batch set
  std::vector<std::string> cost_overrides;
  std::string split_method;
  Schedule schedule;                        // the action lists as written
  nlohmann::json predicted;                 // the metrics as written
  std::string pipewright_version;           // of the writer
  std::optional<PlanProfile> profile;       // cost_model.profile
};

// BadInput naming `source` and the field for anything missing or malformed, and for another format or a
// newer version.
PlanDocument plan_from_json_text(const std::string& text, const std::string& source);
PlanDocument load_plan(const std::string& path);

}  // namespace pw
