#include "cli/cli.hpp"

#include <CLI/CLI.hpp>

#include <map>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace pw {

int cli_main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"pipewright: plan and simulate pipeline-parallel training before spending GPU-hours"};
  app.name("pipewright");
  app.set_version_flag("--version", std::string("pipewright ") + kVersion);
  app.require_subcommand(1);
  std::map<CLI::App*, CommandRunner> runners;
  auto add = [&](CommandRunner (*adder)(CLI::App&)) {
    CommandRunner runner = adder(app);
    runners[app.get_subcommands({}).back()] = std::move(runner);
  };
  add(add_simulate_command);
  add(add_show_command);
  add(add_compare_command);
  add(add_plan_command);
  add(add_replan_command);
  add(add_serve_command);
  add(add_models_command);
  add(add_clusters_command);
  add(add_run_command);
  add(add_profile_command);
  add(add_calibrate_command);
  add(add_kernels_command);
  try {
    app.parse(argc, argv);
    for (auto& [sub, runner] : runners)
      if (sub->parsed()) runner(out);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    if (!e.details().empty()) err << e.details() << "\n";
    return exit_code(e.kind());
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace pw
