#pragma once
// `pipewright serve run`: the serving simulator's batches executed for real on the CPU backend
// (executor/cpu_serving.hpp), measured against what the simulator predicted for them.
#include <CLI/CLI.hpp>

#include <ostream>
#include <string>

#include "cli/serve_options.hpp"

namespace pw {

struct ServeRunOptions {
  ServeOptions serve;
  int pp = 1;
  std::string profile;  // a profile with serving rates; empty: measure one here first
  int repeat = 5;
  bool allow_large = false;

  void add_to(CLI::App& cmd);
};

void run_serve_run(const ServeRunOptions& o, std::ostream& out);

}  // namespace pw
