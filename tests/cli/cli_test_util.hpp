#pragma once
// Runs the command line in-process and keeps what it printed.
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

struct CliResult {
  int code = 0;
  std::string out;
  std::string err;
};

inline CliResult run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "pipewright");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  CliResult r;
  r.code = pw::cli_main(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

inline std::string source_path(const std::string& relative) { return std::string(PIPEWRIGHT_SOURCE_DIR) + "/" + relative; }
