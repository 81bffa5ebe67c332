#pragma once
// What pipewright's CPU backend keeps per layer and micro-batch, in bytes (float32 tensors, int32 token
// ids), as executor/cpu_layers.cpp holds it: the simulator's memory under MemoryAccounting::CpuFloat32.
#include "core/model.hpp"
#include "core/workload.hpp"

namespace pw {

struct CpuKeptBytes {
  double after_forward = 0;   // what F keeps for B
  double after_backward = 0;  // what B keeps for a deferred W (inputs and output gradients of every weight op)
  double output = 0;          // the tensor F sends to the next layer
};

// n = b s tokens, h hidden, q = heads x head_dim, kv = kv_heads x head_dim, f ffn, u the up-projection width
// (2 f for SwiGLU), V vocab, a heads; 4 bytes an element:
//   embedding  F: token ids (n)                              B: dy (n h) + token ids (n)
//   block      F: x-hat, norm output (2 n h each, two norms), 1/rms (2 n), Q, K, V, attention output, up output,
//                 activation output (n (2q + 2kv + u + f)), softmax (a b s^2)
//                 selective: without the softmax; full: the block input (n h) alone
//              B: per weight op its input and output gradient: n (f + u + 2q + 2kv + 8h)
//   head       F: x-hat, norm output (2 n h), 1/rms (n), probabilities (n V), target ids (n)
//              B: norm output + logit gradient (n h + n V), x-hat + norm gradient (2 n h)
CpuKeptBytes cpu_kept_bytes(const TransformerConfig& config, LayerKind kind, int micro_batch_size, int seq_len,
                            Recompute recompute);

}  // namespace pw
