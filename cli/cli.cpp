#include "cli/cli.hpp"

#include <CLI/CLI.hpp>

#include "core/error.hpp"
#include "core/version.hpp"

namespace pw {

int cli_main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"pipewright: plan and simulate pipeline-parallel training"};
  app.set_version_flag("--version", std::string("pipewright ") + kVersion);
  app.require_subcommand(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return exit_code(e.kind());
  }
  return 0;
}

}  // namespace pw
