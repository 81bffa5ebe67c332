#include "cli/cli.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <regex>

#include "cli/argument_check.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace pw {

namespace {

// CLI11 names a negatable flag "--x,--no-x{false}": the value --no-x sets, which reads as the
// default. The descriptions say which is the default; the braces go.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, is_positional);
    static const std::regex braces(R"(\{[^}]*\})");
    if (!is_positional && opt->get_items_expected_max() == 0) name = std::regex_replace(name, braces, "");
    return name;
  }
};

// Each command's help lists the Megatron-LM spellings it takes.
void add_megatron_alias_footers(CLI::App& app) {
  std::string footer;
  for (const OptionAlias& alias : megatron_aliases())
    if (app.get_option_no_throw(std::string(alias.pipewright)) != nullptr)
      footer += fmt::format("\n  {} for {}", alias.megatron, alias.pipewright);
  if (!footer.empty()) app.footer("Megatron-LM's spellings of the same settings are taken:" + footer);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) add_megatron_alias_footers(*sub);
}

}  // namespace

int cli_main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"pipewright: plan and simulate pipeline-parallel training before spending GPU-hours"};
  app.name("pipewright");
  app.set_version_flag("--version", std::string("pipewright ") + kVersion);
  app.require_subcommand(1);
  app.formatter(std::make_shared<HelpFormatter>());
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
  add_megatron_alias_footers(app);
  try {
    std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
    args = checked_arguments(app, args);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
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
