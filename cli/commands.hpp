#pragma once
// Each subcommand registers its options on the app and returns the function that runs it.
#include <CLI/CLI.hpp>

#include <functional>
#include <ostream>

namespace pw {

using CommandRunner = std::function<void(std::ostream& out)>;

CommandRunner add_simulate_command(CLI::App& app);
CommandRunner add_show_command(CLI::App& app);
CommandRunner add_compare_command(CLI::App& app);
CommandRunner add_plan_command(CLI::App& app);
CommandRunner add_replan_command(CLI::App& app);
CommandRunner add_serve_command(CLI::App& app);
CommandRunner add_models_command(CLI::App& app);
CommandRunner add_clusters_command(CLI::App& app);
CommandRunner add_run_command(CLI::App& app);
CommandRunner add_profile_command(CLI::App& app);
CommandRunner add_calibrate_command(CLI::App& app);
CommandRunner add_kernels_command(CLI::App& app);

}  // namespace pw
