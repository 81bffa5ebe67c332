#include "cli/dp_options.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace pw {

void DpOptions::add_to(CLI::App& cmd) {
  distributed_optimizer_flag =
      cmd.add_flag("--distributed-optimizer,!--no-distributed-optimizer", distributed_optimizer,
                   "Shard the optimizer state over dp (ZeRO-1; on by default): gradients reduce-scattered, parameters "
                   "all-gathered");
  cmd.add_option("--zero", zero,
                 "ZeRO level over dp: 0 plain DDP, 1 optimizer state (default), 2 and gradients, 3 and parameters "
                 "(FSDP)");
  cmd.add_option("--dp-shard", dp_shard,
                 "Hybrid sharding: shard the ZeRO state over groups of this many dp ranks, replicated across the "
                 "groups (default: all of dp)");
  cmd.add_option("--reshard-after-forward", reshard,
                 "ZeRO-3: free gathered weights after forward: default (on without pp, as torchtitan), always or never")
      ->capture_default_str();
  cmd.add_option("--fsdp-grad-sync", grad_sync,
                 "ZeRO-3: when FSDP reduce-scatters gradients: default (every micro-batch without pp, once after the "
                 "last with pp, as torchtitan), every-microbatch (no whole gradient kept, a reduction a micro-batch) or "
                 "last-microbatch")
      ->capture_default_str();
  overlap_grad_reduce_flag = cmd.add_flag("--overlap-grad-reduce,!--no-overlap-grad-reduce", overlap_grad_reduce,
               "Reduce each gradient bucket as the last backward fills it (on by default, as Megatron-Core, DDP and "
               "FSDP run); off: the whole reduction after the last backward");
  cmd.add_flag("--overlap-param-gather,!--no-overlap-param-gather", overlap_param_gather,
               "All-gather the updated weights behind the next step's first forward (on by default, as Megatron-Core's "
               "recipes and FSDP's prefetch run; needs --overlap-grad-reduce)");
  cmd.add_option("--ddp-bucket-size", bucket_parameters,
                 "Parameters per gradient bucket (default max(40M, 1M x dp), Megatron-Core's)");
  cmd.add_flag("--grad-reduce-in-bf16", grad_reduce_in_bf16,
               "Keep, accumulate and reduce gradients in bf16 (Megatron-LM's flag; Megatron-Bridge's MoE recipes): 2 "
               "bytes a parameter where the default keeps and reduces them in fp32");
  cmd.add_flag("--precision-aware-optimizer", precision_aware_optimizer,
               "Megatron-Core's precision-aware optimizer (Transformer Engine's FusedAdam; Megatron-Bridge's bf16 "
               "benchmarks): master weights kept as the 2 bytes their bf16 copy lacks, Adam moments at "
               "--exp-avg-dtype and --exp-avg-sq-dtype; needs the distributed optimizer");
  exp_avg_dtype_option = cmd.add_option("--exp-avg-dtype", exp_avg_dtype,
                                        "With --precision-aware-optimizer: Adam's first moment in " + state_dtype_choices())
                             ->capture_default_str();
  exp_avg_sq_dtype_option =
      cmd.add_option("--exp-avg-sq-dtype", exp_avg_sq_dtype,
                     "With --precision-aware-optimizer: Adam's second moment in " + state_dtype_choices())
          ->capture_default_str();
}

void DpOptions::apply(ParallelConfig& pc) const {
  // A bucket holds whole parameters; 1e15 is a thousand times the largest model's.
  if (!(bucket_parameters == 0 || (bucket_parameters >= 1 && bucket_parameters <= 1e15)))
    throw_bad_input("--ddp-bucket-size: must be from 1 to 1e+15 parameters (or 0, the default), got {:g}",
                    bucket_parameters);
  if (zero && (*zero < 0 || *zero > 3)) throw_bad_input("--zero: must be 0, 1, 2 or 3, got {}", *zero);
  if (zero && distributed_optimizer_flag && distributed_optimizer_flag->count() > 0)
    throw_bad_input("--zero: {} and --{}distributed-optimizer both set the sharding; give one of them", *zero,
                    distributed_optimizer ? "" : "no-");
  pc.zero = zero ? *zero : distributed_optimizer ? 1 : 0;
  const std::optional<ParallelConfig::Reshard> r = reshard_from_string(reshard);
  if (!r) throw_bad_input("--reshard-after-forward: unknown '{}'; use default, always or never", reshard);
  pc.reshard_after_forward = *r;
  const std::optional<ParallelConfig::GradSync> g = grad_sync_from_string(grad_sync);
  if (!g) throw_bad_input("--fsdp-grad-sync: unknown '{}'; use default, every-microbatch or last-microbatch", grad_sync);
  pc.fsdp_grad_sync = *g;
  pc.overlap_grad_reduce = overlap_grad_reduce;
  pc.overlap_param_gather = overlap_param_gather;
  pc.bucket_parameters = bucket_parameters;
  pc.dp_shard = dp_shard;
  pc.grad_reduce_in_bf16 = grad_reduce_in_bf16;
  // Megatron-LM takes the dtypes without the optimizer and ignores them: a run would not keep what was asked.
  for (const CLI::Option* o : {exp_avg_dtype_option, exp_avg_sq_dtype_option})
    if (o && o->count() > 0 && !precision_aware_optimizer)
      throw_bad_input("{}: takes effect only with the precision-aware optimizer; add --precision-aware-optimizer",
                      o->get_name());
  pc.optimizer_precision.precision_aware = precision_aware_optimizer;
  const auto dtype = [](const std::string& text, const char* option) {
    const std::optional<StateDtype> d = state_dtype_from_string(text);
    if (!d) throw_bad_input("{}: unknown dtype '{}'; use {}", option, text, state_dtype_choices());
    return *d;
  };
  pc.optimizer_precision.exp_avg = dtype(exp_avg_dtype, "--exp-avg-dtype");
  pc.optimizer_precision.exp_avg_sq = dtype(exp_avg_sq_dtype, "--exp-avg-sq-dtype");
}

void DpOptions::check_grad_sync_levels(const std::vector<int>& levels) const {
  if (grad_sync == "default" || std::find(levels.begin(), levels.end(), 3) != levels.end()) return;
  throw_bad_input("--fsdp-grad-sync: {} applies to ZeRO-3 (FSDP), not ZeRO-{}; add --zero 3 or leave it out", grad_sync,
                  levels.empty() ? 1 : levels.front());
}

bool DpOptions::overlap_given() const { return overlap_grad_reduce_flag && overlap_grad_reduce_flag->count() > 0; }

bool DpOptions::zero_given() const {
  return zero.has_value() || (distributed_optimizer_flag && distributed_optimizer_flag->count() > 0);
}

}  // namespace pw
