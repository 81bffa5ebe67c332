#pragma once
// Mixture-of-experts blocks (Shazeer et al. 2017; Mixtral, DeepSeek-V3, Qwen3-MoE, gpt-oss, Llama 4): the
// block's MLP is replaced by routed experts, small MLPs of which a router picks top_k per token, and
// optionally shared experts every token passes through. Which blocks are MoE is a pattern over the blocks.
#include <string>
#include <vector>

namespace pw {

struct MoeConfig {
  int experts = 0;            // routed experts E
  int top_k = 0;              // experts each token is routed to, k
  int expert_ffn = 0;         // one routed expert's intermediate size
  int shared_expert_ffn = 0;  // the shared experts' intermediate size, all of them together (0: none)
  // Qwen2-MoE's shared_expert_gate: a sigmoid of one linear (h weights) scales the shared expert's output.
  bool shared_expert_gate = false;
  // gpt-oss: biases on every expert's projections (gate-up and down) and on the router's linear layer.
  bool expert_bias = false;
  // DeepSeek-V3's e_score_correction_bias: one bias per expert, added to the scores for the choice only.
  bool router_score_bias = false;
  // Blocks i < first_dense are dense (DeepSeek's first_k_dense_replace); from there block i is MoE when
  // (i + 1) % every == 0 (Qwen's decoder_sparse_step, Llama 4's interleave_moe_layer_step) and it is not
  // listed in dense_blocks (Qwen's mlp_only_layers).
  int first_dense = 0;
  // Group-limited routing (DeepSeek's n_group and topk_group, Megatron-Core's --moe-router-num-groups and
  // --moe-router-group-topk): the experts in `groups` equal runs, each token's top_k picked inside its
  // `top_groups` best groups. Laid out one group per node (DeepSeek-V3: 256 experts, 8 groups on 8 nodes at
  // ep 64) it caps the nodes a token reaches at top_groups. 0: no limit.
  int groups = 0;
  int top_groups = 0;
  // DeepSeek's routed_scaling_factor (Megatron-Core's --moe-router-topk-scaling-factor): the routed experts'
  // weighted output times this. What the model computes, not what it costs: exports carry it.
  double routed_scaling = 1.0;
  int every = 1;
  std::vector<int> dense_blocks;

  bool moe_block(int i) const;
  // The routed experts' parameters in one MoE block, all experts (their share per GPU divides by ep x etp).
  double routed_parameters(int hidden, bool gated) const;
  // The router's linear layer and its biases (every tp rank holds it whole, as Megatron-Core's TopKRouter).
  double router_parameters(int hidden) const;
  // The shared experts and their gate (sharded by tp as a dense MLP is).
  double shared_parameters(int hidden, bool gated) const;

  friend bool operator==(const MoeConfig&, const MoeConfig&) = default;
};

// Throws BadInput (naming fields by `source` and the given field names) when the shape is impossible:
// top_k above the expert count, no experts, a dense pattern that leaves no MoE block.
void check_moe(const MoeConfig& moe, int layers, const std::string& source);

}  // namespace pw
