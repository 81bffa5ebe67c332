#pragma once
// Megatron-Core's precision-aware optimizer (--use-precision-aware-optimizer: Transformer Engine's FusedAdam
// keeps the optimizer state): the Adam moments at a width of their own (--exp-avg-dtype, --exp-avg-sq-dtype),
// and the fp32 master weights as the 16 bits their bf16 copy lacks (store_param_remainders, on by default
// with Transformer Engine 2.1 or later: megatron/core/optimizer/optimizer_config.py,
// distrib_optimizer.py, Megatron-LM d98e8a6). Megatron-Bridge's benchmark runner turns it on for every
// bf16 Adam recipe; its DeepSeek-V3 recipes keep both moments in bf16.
#include <optional>
#include <string>

namespace pw {

enum class StateDtype { Fp32, Fp16, Bf16, Fp8 };

const char* to_string(StateDtype d);  // "fp32", "fp16", "bf16", "fp8": Megatron-LM's choices
std::optional<StateDtype> state_dtype_from_string(const std::string& text);  // nullopt for other text
// The names state_dtype_from_string takes, for messages: "fp32, fp16, bf16 or fp8", each inside `quote`.
std::string state_dtype_choices(const char* quote = "");
double bytes_of(StateDtype d);

struct OptimizerPrecision {
  bool precision_aware = false;
  StateDtype exp_avg = StateDtype::Fp32;     // Adam's first moment
  StateDtype exp_avg_sq = StateDtype::Fp32;  // its second
  // Bytes a parameter's optimizer state takes (master weights and moments); nullopt without the
  // precision-aware optimizer: the cost model's own count then (12: fp32 master, m and v).
  std::optional<double> state_bytes() const;
  bool operator==(const OptimizerPrecision&) const = default;
};

// The master weights' bytes under it: the low 16 bits of fp32 beside the bf16 weight. Megatron-Core keeps a
// whole fp32 copy instead under an fp8 recipe other than delayed scaling; pipewright's fp8 is delayed
// scaling (what its Megatron export writes), so the remainder always applies.
inline constexpr double kMasterRemainderBytes = 2.0;

}  // namespace pw
