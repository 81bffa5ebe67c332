#pragma once
// How data parallelism reduces gradients, the same options on every command with a scenario:
// --zero 0|1|2|3 (or Megatron's --distributed-optimizer / --no-distributed-optimizer for 1 and 0), --dp-shard,
// --reshard-after-forward, --fsdp-grad-sync, --overlap-grad-reduce / --no-overlap-grad-reduce,
// --overlap-param-gather / --no-overlap-param-gather, --ddp-bucket-size, --grad-reduce-in-bf16, --precision-aware-optimizer with
// --exp-avg-dtype and --exp-avg-sq-dtype (docs/cost-model.md).
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/workload.hpp"

namespace pw {

struct DpOptions {
  bool distributed_optimizer = true;
  std::optional<int> zero;  // unset: from --distributed-optimizer
  std::string reshard = "default";
  std::string grad_sync = "default";
  CLI::Option* distributed_optimizer_flag = nullptr;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  double bucket_parameters = 0;  // 0: Megatron's default
  int dp_shard = 0;              // 0: all of dp
  bool grad_reduce_in_bf16 = false;
  bool precision_aware_optimizer = false;
  std::string exp_avg_dtype = "fp32";
  std::string exp_avg_sq_dtype = "fp32";
  CLI::Option* exp_avg_dtype_option = nullptr;
  CLI::Option* exp_avg_sq_dtype_option = nullptr;

  void add_to(CLI::App& cmd);
  // BadInput naming --ddp-bucket-size outside 0 (the default) and 1 to 1e15 parameters, --zero outside 0..3 or given with
  // --distributed-optimizer, --reshard-after-forward not default, always or never, --fsdp-grad-sync not default,
  // every-microbatch or last-microbatch, a moment's dtype not fp32, fp16, bf16 or fp8, or given without
  // --precision-aware-optimizer.
  void apply(ParallelConfig& pc) const;
  // BadInput naming --fsdp-grad-sync when it is not default and none of the ZeRO levels the command runs
  // (the one level, or plan's --zeros) is 3.
  void check_grad_sync_levels(const std::vector<int>& levels) const;
  // Whether the command line fixed the ZeRO level (--zero or --[no-]distributed-optimizer), or said whether
  // to overlap the gradient reduction.
  bool zero_given() const;
  bool overlap_given() const;
  CLI::Option* overlap_grad_reduce_flag = nullptr;
};

}  // namespace pw
