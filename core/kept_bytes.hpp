#pragma once
// What pipewright's own backends keep per layer and micro-batch, in bytes: the simulator's activation
// memory when it predicts a run of them (MemoryAccounting::CpuFloat32, CudaBf16, CudaFloat32). The CPU
// backend (executor/cpu_layers.cpp) holds float32 tensors; the CUDA backend (executor/cuda/cuda_layers.cpp)
// the same slots in its --dtype, but per-row statistics in fp32, K and V expanded to every query head, and
// the head's logits with their log-sum-exp where the CPU keeps probabilities.
#include "core/model.hpp"
#include "core/workload.hpp"

namespace pw {

struct KeptBytes {
  double after_forward = 0;   // what F keeps for B
  double after_backward = 0;  // what B keeps for a deferred W (inputs and output gradients of every weight op)
  double output = 0;          // the tensor F sends to the next layer
};

// How a backend stores what it keeps.
struct KeptLayout {
  double element = 4;              // an activation element
  bool kv_per_query_head = false;  // K and V kept as heads x head_dim (GQA expanded), not kv_heads x head_dim
  bool head_keeps_lse = false;     // the head keeps its logits and an fp32 log-sum-exp a token
};
inline constexpr KeptLayout kCpuKeptLayout{4, false, false};
inline KeptLayout cuda_kept_layout(double element_bytes) { return {element_bytes, true, true}; }

// n = b s tokens, h hidden, q = heads x head_dim, kv = kv_heads x head_dim (q with kv_per_query_head), f ffn,
// u the up-projection width (2 f for SwiGLU), V vocab, a heads; e the element, 4 bytes for 1/rms, the
// log-sum-exp and int32 token ids:
//   embedding  F: token ids (n)                              B: dy (n h e) + token ids (n)
//   block      F: x-hat, norm output (2 n h each, two norms), Q, K, V, attention output, up output,
//                 activation output (n (2q + 2kv + u + f)), softmax (a b s^2), all e; 1/rms (2 n)
//                 selective: without the softmax; full: the block input (n h e) alone
//              B: per weight op its input and output gradient: n (f + u + 2q + 2kv + 8h) e (kv as kept in F)
//   head       F: x-hat, norm output (2 n h e), 1/rms (n), probabilities or logits (n V e), target ids (n),
//                 log-sum-exp (n) with head_keeps_lse
//              B: norm output + logit gradient (n h + n V), x-hat + norm gradient (2 n h), all e
//   MoE block  (the CPU's, executor/cpu_moe_mlp.hpp) the block's attention and norms as above; its MLP keeps,
//              with R = n k rows routed (every replica's share when the routing is balanced), f' the expert
//              FFN, u' its up width, f_s and u_s the shared expert's:
//              F: choices and weights (2 n k), outputs (n k h), received rows' expert and counts (R + ep),
//                 expert inputs, up outputs, activations (R (h + u' + f')), shared up and activation
//                 (n (u_s + f_s)), with the gate its output and value (n h + n), all e
//              B: attention and norms n (2q + 2kv + 6h); router n (h + E); experts R (2h + u' + f');
//                 shared n (2h + u_s + f_s); gate n (h + 1), all e
// `block` is the layer's place among the blocks (which are MoE); `ep` the replicas the experts spread over.
KeptBytes kept_bytes(const TransformerConfig& config, LayerKind kind, int block, int micro_batch_size, int seq_len,
                     Recompute recompute, const KeptLayout& layout, int ep = 1);

inline KeptBytes cpu_kept_bytes(const TransformerConfig& config, LayerKind kind, int block, int micro_batch_size,
                                int seq_len, Recompute recompute, int ep = 1) {
  return kept_bytes(config, kind, block, micro_batch_size, seq_len, recompute, kCpuKeptLayout, ep);
}

}  // namespace pw
