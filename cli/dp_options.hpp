#pragma once
// How data parallelism reduces gradients, the same options on every command with a scenario:
// --distributed-optimizer / --no-distributed-optimizer, --overlap-grad-reduce / --no-overlap-grad-reduce,
// --ddp-bucket-size (Megatron-LM's flags of the same names; docs/cost-model.md).
#include <CLI/CLI.hpp>

#include "core/workload.hpp"

namespace pw {

struct DpOptions {
  bool distributed_optimizer = true;
  bool overlap_grad_reduce = true;
  double bucket_parameters = 0;  // 0: Megatron's default

  void add_to(CLI::App& cmd);
  // BadInput naming --ddp-bucket-size when it is not a positive count.
  void apply(ParallelConfig& pc) const;
};

}  // namespace pw
