#pragma once
// Megatron-Core's selective recomputation by module (--recompute-granularity selective --recompute-modules;
// TransformerConfig.recompute_modules in megatron/core/transformer/transformer_config.py): each named part
// of a block drops its activations at F and is rerun at the start of B. One more is not Megatron's:
// elementwise, a backward written by hand that keeps every GEMM's and the attention's output and rebuilds what
// the elementwise operations made from them (LLaMA's, Touvron et al. 2023, section 2.4).
#include <string>
#include <vector>

namespace pw {

enum class RecomputeModule : unsigned {
  CoreAttn = 1u << 0,       // the attention core (Korthikanti's selective recompute)
  Layernorm = 1u << 1,      // the norms Transformer Engine does not fuse into the next linear layer
  MoeAct = 1u << 2,         // the routed experts' activation function
  MlaUpProj = 1u << 3,      // MLA's query and key-value up projections with their rotary part
  Mlp = 1u << 4,            // the dense MLP of non-MoE blocks
  SharedExperts = 1u << 5,  // an MoE block's shared experts
  Elementwise = 1u << 6,    // the norms' outputs and the MLP activations' outputs (not a Megatron module)
};

struct RecomputeModules {
  unsigned bits = static_cast<unsigned>(RecomputeModule::CoreAttn);  // Megatron's default: ["core_attn"]

  bool has(RecomputeModule m) const { return (bits & static_cast<unsigned>(m)) != 0; }
  bool is_default() const { return bits == static_cast<unsigned>(RecomputeModule::CoreAttn); }
  bool operator==(const RecomputeModules&) const = default;
};

// "core_attn,moe_act" (commas or spaces). BadInput naming --recompute-modules for an unknown module, a
// Megatron module pipewright does not model, or an empty list.
RecomputeModules recompute_modules_from_string(const std::string& text);
// Megatron's names in its order, then elementwise: {"core_attn", "moe_act"}.
std::vector<std::string> module_names(RecomputeModules m);
std::string to_string(RecomputeModules m);  // the names joined by commas

}  // namespace pw
