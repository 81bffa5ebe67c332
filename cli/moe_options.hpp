#pragma once
// How routed experts receive their tokens, the same options on every command with a scenario:
// --capacity-factor (0: dropless) and --dispatcher alltoall|flex (docs/cost-model.md#mixture-of-experts).
#include <CLI/CLI.hpp>

#include <string>

#include "core/workload.hpp"

namespace pw {

struct MoeOptions {
  double capacity_factor = 0;
  std::string dispatcher = "alltoall";

  void add_to(CLI::App& cmd);
  // BadInput naming --dispatcher for an unknown one (--capacity-factor is checked with the model).
  void apply(Workload& w) const;
};

}  // namespace pw
