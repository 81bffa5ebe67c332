#pragma once
// `plan --fail 1node` (or `8gpus`, or a bare GPU count): the ways a run goes on when that much of it fails
// (planner/recovery_ways.hpp); `--batch-tolerance` (plan and replan): how far dropping replicas may move
// the global batch.
#include <CLI/CLI.hpp>

#include <string>

#include "core/cluster.hpp"

namespace pw {

struct FailureOptions {
  std::string fail;  // empty: not asked
  std::string batch_tolerance;  // empty: kDefaultBatchTolerance

  void add_to(CLI::App& cmd);
  bool asked() const { return !fail.empty(); }
};

void add_batch_tolerance_option(CLI::App& cmd, std::string& text);
// The fraction --batch-tolerance gives (kDefaultBatchTolerance when empty); BadInput for anything but 0% to 50%.
double batch_tolerance_of(const std::string& text);

// What --fail takes from a run of `gpus` GPUs on `cluster`.
struct LostGpus {
  int gpus = 0;   // GPUs lost
  int nodes = 0;  // whole nodes lost (0 when given in GPUs)
  int left = 0;   // GPUs the run keeps
  std::string what;  // "1 node (8 GPUs)", "3 GPUs"
};

// BadInput naming --fail for a malformed count ("15Q"), zero, or more than the run or the cluster has.
LostGpus lost_gpus(const std::string& fail, int gpus, const Cluster& cluster);

}  // namespace pw
