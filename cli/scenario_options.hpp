#pragma once
// The options that describe a scenario (model, cluster, degrees, batch, schedule, split), shared by the
// commands that take one (simulate now; plan and run reuse them).
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "sim/scenario.hpp"

namespace pw {

struct ScenarioOptions {
  std::string model;
  std::string cluster;
  int tp = 1, pp = 1, dp = 1, vpp = 1;
  std::optional<int> microbatches;
  std::optional<int> global_batch_size;
  int micro_batch_size = 1;
  int seq_len = 0;
  std::string schedule = "1f1b";
  std::string split;
  std::string recompute = "none";
  bool no_sequence_parallel = false;
  bool flash_attention = false;
  int group_size = 0;

  void add_to(CLI::App& cmd);
  // Loads the model and cluster and parses the split; BadInput on anything wrong.
  Scenario to_scenario() const;
};

// "24,24,24,24" -> {24, 24, 24, 24}; BadInput naming --split otherwise.
std::vector<int> parse_split(const std::string& text);

}  // namespace pw
