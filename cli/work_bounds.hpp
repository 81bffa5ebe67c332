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

// The most plans --top may ask for: a table longer than this is read by no one, and every plan kept past the
// first few weakens the search's pruning (a --top of 2^31 scored every candidate).
constexpr int kMaxTop = 1000;
// BadInput naming --top when it is below 1 or above kMaxTop.
void check_top(int top);

// `schedule_csv`: --schedule-csv, when the command has it.
SimulationSource simulation_source(const ScenarioOptions& o, const std::string& schedule_csv = "");

}  // namespace pw
