#include "cli/dp_options.hpp"

#include <cmath>

#include "core/error.hpp"

namespace pw {

void DpOptions::add_to(CLI::App& cmd) {
  cmd.add_flag("--distributed-optimizer,!--no-distributed-optimizer", distributed_optimizer,
               "Shard the optimizer state over dp (ZeRO-1; on by default): gradients reduce-scattered, parameters "
               "all-gathered");
  cmd.add_flag("--overlap-grad-reduce,!--no-overlap-grad-reduce", overlap_grad_reduce,
               "Reduce each gradient bucket as the last backward fills it (on by default, as Megatron-Core, DDP and "
               "FSDP run); off: the whole reduction after the last backward");
  cmd.add_option("--ddp-bucket-size", bucket_parameters,
                 "Parameters per gradient bucket (default max(40M, 1M x dp), Megatron-Core's)");
}

void DpOptions::apply(ParallelConfig& pc) const {
  if (!(bucket_parameters >= 0) || !std::isfinite(bucket_parameters))
    throw_bad_input("--ddp-bucket-size: must be a positive number of parameters, got {}", bucket_parameters);
  pc.distributed_optimizer = distributed_optimizer;
  pc.overlap_grad_reduce = overlap_grad_reduce;
  pc.bucket_parameters = bucket_parameters;
}

}  // namespace pw
