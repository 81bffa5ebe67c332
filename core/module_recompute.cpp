// Megatron-Core's selective recomputation by module, as Megatron-LM d98e8a6 runs each:
//   layernorm      transformer_layer.py recomputes input_layernorm and pre_mlp_layernorm where they are modules
//                  of their own; Transformer Engine's layer spec (gpt_layer_specs.py) fuses the input norm into
//                  the QKV linear except before MLA's down projections, and the pre-MLP norm into fc1 except in
//                  MoE blocks, where the router reads it.
//   moe_act        moe/experts.py checkpoints the routed experts' activation (without its output).
//   mla_up_proj    multi_latent_attention.py checkpoints the up projections and rotary embedding, freeing Q, K
//                  and V once the attention core has run.
//   mlp            the dense MLP of blocks that are not MoE (transformer_layer.py).
//   shared_experts moe/shared_experts.py checkpoints the shared experts' MLP.
// and one that is not Megatron's (its export refuses it):
//   elementwise    a backward written by hand that saves the activations expensive to compute, the outputs of
//                  the linear layers and of the attention, and rebuilds the rest (LLaMA, Touvron et al. 2023,
//                  section 2.4; xformers' fused SwiGLU saves the gate and up and rebuilds their product): the
//                  two norms' outputs from their inputs, kept for the norms' backward anyway, and every MLP
//                  activation's output (dense, routed and shared experts) from its input.
// Each drops what it produced at F; B reruns it first and holds the result while it runs. What W reads among
// the dropped tensors (the norms' outputs, fc2's inputs) leaves weight_grad_bytes too, as under full
// recomputation: nothing stored at F waits for W, and fp8 then halves only the W inputs still stored.
#include "core/layer_dims.hpp"

namespace pw::detail {
namespace {

// B rebuilds an activation's output of `out` elements from its kept input of `in` (GeLU reads its input,
// SwiGLU its gate and up, and either writes the output), cast back first when that input is kept in fp8.
void rerun_activation(PhaseWork& p, const Dims& d, double out, double in) {
  elementwise(p, (d.swiglu ? 3 : 2) * kBf16 * out);
  cast_activation_input(p, d, in);
}

}  // namespace

void recompute_modules_work(LayerWork& lw, const Dims& d, RecomputeModules modules) {
  const double n = d.n();
  double dropped = 0;
  double dropped_weight_inputs = 0;
  const int separate_norms = (d.latent > 0 ? 1 : 0) + (d.moe ? 1 : 0);
  if (modules.has(RecomputeModule::Layernorm)) {
    for (int i = 0; i < separate_norms; ++i) elementwise(lw.recompute, norm_bytes(d));
    dropped += separate_norms * d.replicated(kBf16 * n * d.h);
    dropped_weight_inputs += separate_norms * d.replicated(kBf16 * n * d.h);
  }
  if (modules.has(RecomputeModule::MlaUpProj) && d.latent > 0) {
    for (const Projection& pr : d.in_proj)
      if (pr.split) gemm(lw.recompute, n, pr.in, pr.out, projection_split(pr, d), TpSplit::N);
    if (d.rotary) elementwise(lw.recompute, 2 * kBf16 * n * d.rope / d.t);
    dropped += kBf16 * n * (d.q + d.k_stored + d.v_stored) / d.t;
  }
  if (modules.has(RecomputeModule::Mlp) && !d.moe) {
    dense_mlp_forward(lw.recompute, d);
    dropped += dense_mlp_stored_bytes(d) * n * d.f / d.t;
    dropped_weight_inputs += kBf16 * n * d.f / d.t;
  }
  if (modules.has(RecomputeModule::MoeAct) && d.moe) {
    expert_activation(lw.recompute, d);
    dropped += expert_activation_stored(d);
    dropped_weight_inputs += expert_activation_stored(d);
  }
  if (modules.has(RecomputeModule::SharedExperts) && d.moe && d.routed.shared_f > 0) {
    shared_experts_forward(lw.recompute, d);
    dropped += shared_experts_stored(d);
    dropped_weight_inputs += kBf16 * n * d.routed.shared_f / d.t;
  }
  if (modules.has(RecomputeModule::Elementwise)) {
    // Both norms' outputs (the QKV and MLP inputs, which W reads too), less those layernorm drops already.
    const int norms = 2 - (modules.has(RecomputeModule::Layernorm) ? separate_norms : 0);
    for (int i = 0; i < norms; ++i) elementwise(lw.recompute, norm_bytes(d));
    double outputs = norms * d.replicated(kBf16 * n * d.h);
    // The activations' outputs, each a down projection's input; mlp, moe_act and shared_experts drop theirs.
    if (!d.moe && !modules.has(RecomputeModule::Mlp)) {
      rerun_activation(lw.recompute, d, n * d.f / d.t, n * d.mlp_in() / d.t);
      outputs += kBf16 * n * d.f / d.t;
    }
    if (d.moe && !modules.has(RecomputeModule::MoeAct)) {
      expert_activation(lw.recompute, d);
      outputs += expert_activation_stored(d);
    }
    if (d.moe && d.routed.shared_f > 0 && !modules.has(RecomputeModule::SharedExperts)) {
      rerun_activation(lw.recompute, d, n * d.routed.shared_f / d.t, n * (d.swiglu ? 2 : 1) * d.routed.shared_f / d.t);
      outputs += kBf16 * n * d.routed.shared_f / d.t;
    }
    dropped += outputs;
    dropped_weight_inputs += outputs;
  }
  lw.activation_bytes -= dropped;
  lw.weight_grad_bytes -= dropped_weight_inputs;
  lw.working_bytes += dropped;
}

}  // namespace pw::detail
