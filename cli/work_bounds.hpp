#pragma once
// The bounds before work as the commands apply them: --allow-large, and what a scenario's options say
// about where its micro-batches and schedule come from.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/scenario_options.hpp"
#include "core/work_estimate.hpp"
#include "sim/simulation_estimate.hpp"

namespace pw {

// Registers --allow-large, the same on every command that has bounds.
void add_allow_large_flag(CLI::App& cmd, bool& allow_large);

// check_work against this machine's limits, unless --allow-large.
void check_work_unless_allowed(const std::string& command, const std::vector<WorkEstimate>& parts, bool allow_large);

// `schedule_csv`: --schedule-csv, when the command has it.
SimulationSource simulation_source(const ScenarioOptions& o, const std::string& schedule_csv = "");

}  // namespace pw
