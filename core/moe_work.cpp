// The MoE MLP of a block as Megatron-Core's MoELayer runs it with the all-to-all token dispatcher: the router
// scores this rank's tokens, each token is copied to its top_k experts (permuted), the copies are sent to
// the ep ranks holding those experts (dispatch all-to-all), gathered over etp, run through grouped GEMMs,
// reduced over etp, sent back (combine all-to-all) and summed per token; shared experts run as a dense tp MLP
// on every token beside them. The router's weights scale each copy inside the experts' activation (fc2's
// input), not at the sum: Megatron-Core's weighted SwiGLU since "Memory efficient token permutation"
// (2659630721, core_v0.13.0; moe/experts.py bias_act_func at d98e8a64), so the unpermute's backward reads no
// expert output and none is kept.
#include "core/layer_dims.hpp"

namespace pw::detail {
namespace {

void routed_gemm(PhaseWork& p, double flops, double weight_bytes, bool padded) {
  p.gemm_flops += flops;
  p.routed_gemm_flops += flops;
  p.routed_padded = padded;
  // A grouped GEMM reads every local expert's weights once: with few tokens per expert that traffic,
  // not the FLOPs, bounds it.
  p.memory_bytes += weight_bytes;
  ++p.kernels;
}

// Routed token copies this rank sends (and receives) per all-to-all: its tokens x top_k, padded to capacity.
double sent_pairs(const Dims& d) { return d.routed.pairs / d.routed.etp; }
double expert_in(const Dims& d) { return (d.swiglu ? 2 : 1) * d.routed.f / d.routed.etp; }  // fc1 width per etp rank
double expert_f(const Dims& d) { return d.routed.f / d.routed.etp; }
double local_weights(const Dims& d, double width) { return kBf16 * d.routed.local * d.h * width; }
bool padded(const Dims& d) { return d.routed.capacity > 0; }

void all_to_all(PhaseWork& p, const Dims& d) {
  p.all_to_alls.push_back(kBf16 * sent_pairs(d) * d.h);
  p.dispatch = RoutedDispatch{static_cast<int>(d.routed.experts), static_cast<int>(d.routed.k), d.routed.node_dedup,
                              d.routed.groups, d.routed.top_groups, d.tokens_per_rank(), static_cast<int>(d.h),
                              d.routed.node_dedup ? DeepEpKernels::Normal : DeepEpKernels::None};
}

void etp_collective(PhaseWork& p, const Dims& d, CollectiveKind kind) {
  if (d.routed.etp > 1) p.etp_collectives.push_back({kind, kBf16 * d.routed.pairs * d.h});
}

double shared_in(const Dims& d) { return (d.swiglu ? 2 : 1) * d.routed.shared_f; }

}  // namespace

void moe_forward(PhaseWork& p, const Dims& d) {
  const double tokens = d.tokens_per_rank();
  const RoutedShape& r = d.routed;
  gemm(p, tokens, d.h, r.experts, 1, TpSplit::N);                 // router (whole on every rank)
  elementwise(p, 3 * kFp32 * tokens * r.experts);     // scores (softmax or sigmoid), top-k
  elementwise(p, 2 * kBf16 * sent_pairs(d) * d.h);    // permute: each token copied to its experts
  all_to_all(p, d);  // dispatch
  etp_collective(p, d, CollectiveKind::AllGather);
  routed_gemm(p, 2 * r.pairs * d.h * expert_in(d), local_weights(d, expert_in(d)), padded(d));  // fc1
  expert_activation(p, d);
  routed_gemm(p, 2 * r.pairs * expert_f(d) * d.h, local_weights(d, expert_f(d)), padded(d));    // fc2
  etp_collective(p, d, CollectiveKind::ReduceScatter);
  all_to_all(p, d);  // combine
  elementwise(p, kBf16 * (sent_pairs(d) + tokens) * d.h);  // unpermute: each token's copies summed
  if (r.shared_f > 0) {
    shared_experts_forward(p, d);
    elementwise(p, 3 * kBf16 * tokens * d.h);          // shared output added to the routed one
  }
}

// Reads fc1's output (gate and up for a gated MLP), writes fc2's input scaled by the copy's router weight.
void expert_activation(PhaseWork& p, const Dims& d) {
  elementwise(p, (d.swiglu ? 3 : 2) * kBf16 * d.routed.pairs * expert_f(d));
  cast_activation_input(p, d, d.routed.pairs * expert_in(d));
}
double expert_activation_stored(const Dims& d) { return kBf16 * d.routed.pairs * expert_f(d); }

void shared_experts_forward(PhaseWork& p, const Dims& d) {
  const RoutedShape& r = d.routed;
  gemm(p, d.n(), d.h, shared_in(d), d.t, TpSplit::N);
  elementwise(p, (d.swiglu ? 3 : 2) * kBf16 * d.n() * r.shared_f / d.t);
  cast_activation_input(p, d, d.n() * shared_in(d) / d.t);
  gemm(p, d.n(), r.shared_f, d.h, d.t, TpSplit::K);
  tp_region_collectives(p, d);
  if (r.shared_gate) gemm(p, d.n(), d.h, 1, d.t, TpSplit::M);
}
double shared_experts_stored(const Dims& d) {
  return d.n() * (d.act_in * shared_in(d) + kBf16 * d.routed.shared_f) / d.t;
}

void moe_backward_input(PhaseWork& p, const Dims& d) {
  const double tokens = d.tokens_per_rank();
  const RoutedShape& r = d.routed;
  elementwise(p, kBf16 * (sent_pairs(d) + tokens) * d.h);  // unpermute backward: each copy gets its token's gradient
  all_to_all(p, d);  // combine's gradient
  etp_collective(p, d, CollectiveKind::AllGather);
  routed_gemm(p, 2 * r.pairs * d.h * expert_f(d), local_weights(d, expert_f(d)), padded(d));    // fc2 dgrad
  cast_activation_input(p, d, r.pairs * expert_in(d));
  elementwise(p, (d.swiglu ? 5 : 3) * kBf16 * r.pairs * expert_f(d));
  routed_gemm(p, 2 * r.pairs * expert_in(d) * d.h, local_weights(d, expert_in(d)), padded(d));  // fc1 dgrad
  etp_collective(p, d, CollectiveKind::ReduceScatter);
  all_to_all(p, d);  // dispatch's gradient
  elementwise(p, 2 * kBf16 * sent_pairs(d) * d.h);         // permute backward: copies summed per token
  elementwise(p, 3 * kFp32 * tokens * r.experts);          // scores backward
  gemm(p, tokens, r.experts, d.h, 1, TpSplit::N);                      // router dgrad
  if (r.shared_f > 0) {
    gemm(p, d.n(), d.h, r.shared_f, d.t, TpSplit::N);
    cast_activation_input(p, d, d.n() * shared_in(d) / d.t);
    elementwise(p, (d.swiglu ? 5 : 3) * kBf16 * d.n() * r.shared_f / d.t);
    gemm(p, d.n(), shared_in(d), d.h, d.t, TpSplit::K);
    tp_region_collectives(p, d);
  }
}

void moe_backward_weight(PhaseWork& p, const Dims& d) {
  const RoutedShape& r = d.routed;
  routed_gemm(p, 2 * d.h * r.pairs * expert_in(d), 0, padded(d));
  routed_gemm(p, 2 * expert_f(d) * r.pairs * d.h, 0, padded(d));
  gemm(p, d.h, d.tokens_per_rank(), r.experts, 1, TpSplit::N);  // router
  if (r.shared_f > 0) {
    gemm(p, d.h, d.n(), shared_in(d), d.t, TpSplit::N);
    gemm(p, r.shared_f, d.n(), d.h, d.t, TpSplit::M);
  }
}

MoeMemory moe_memory(const Dims& d) {
  const RoutedShape& r = d.routed;
  const double tokens = d.tokens_per_rank();
  MoeMemory m;
  // The router's fp32 scores and its routing map (1 byte per token and expert); for each copy, fc1's input,
  // its output (gate and up) and their weighted product (fc2's input; the weighted activation's backward
  // gets the router weight's gradient from fc1's output); the shared experts' inner tensors as a dense MLP's.
  m.stored = (kFp32 + 1) * tokens * r.experts + r.pairs * (kBf16 * d.h + d.act_in * expert_in(d) + kBf16 * expert_f(d)) +
             shared_experts_stored(d);
  m.weight_grad = kBf16 * r.pairs * (d.h + expert_f(d)) + kBf16 * d.n() * r.shared_f / d.t;
  // The dispatched and combined copies in flight, and the gradient of fc1's output.
  m.working = 2 * kBf16 * sent_pairs(d) * d.h + kBf16 * r.pairs * expert_in(d) + kBf16 * d.n() * shared_in(d) / d.t;
  m.fp8_forward_inputs = r.pairs * (d.h + expert_f(d)) + (r.shared_f > 0 ? d.n() * (d.h + r.shared_f / d.t) : 0);
  m.fp8_output_grads = r.pairs * (d.h + expert_in(d)) + (r.shared_f > 0 ? d.n() * (d.h + shared_in(d) / d.t) : 0);
  return m;
}

}  // namespace pw::detail
