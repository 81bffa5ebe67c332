#pragma once
// The small kernels of the CUDA layers (the GEMMs are cuBLASLt's, executor/cuda/gemm.hpp). Each mirrors a
// CPU op of executor/cpu_ops.hpp: same formulas, fp32 arithmetic inside whatever the storage type. Matrices
// are row-major (tokens x features) as on the CPU; "T" below is the activation type (fp32 or bf16), the
// weight gradients and optimizer state are fp32. Launchers check the launch and return at once (the work
// is on `stream`).
#include <cstdint>

#include <cuda_runtime.h>

#include "executor/cuda/host/dtype.hpp"

namespace pw::cuda {

// x[r] = table[tokens[r]] (+ positions[r % seq] when positions is not null); table, positions, out: T.
void embedding_forward(DType t, const int* tokens, const void* table, const void* positions, int n, int hidden, int seq,
                       void* out, cudaStream_t stream);
// dtable[tokens[r]] += dy[r]; dpositions[r % seq] += dy[r] (when not null). dy: T; the gradients fp32.
void embedding_backward_weight(DType t, const int* tokens, const void* dy, int n, int hidden, int seq, float* dtable,
                               float* dpositions, cudaStream_t stream);

// LayerNorm (layer_norm) or RMSNorm over each row of x (n x h): xhat and y = xhat * gamma (+ beta) in T,
// 1 / std (or 1 / rms) per row in rstd (fp32).
void norm_forward(DType t, bool layer_norm, const void* x, const void* gamma, const void* beta, int n, int h, void* xhat,
                  float* rstd, void* y, cudaStream_t stream);
// dx = (residual +) the norm's input gradient (ops::norm_backward_input); residual may be null.
void norm_backward_input(DType t, bool layer_norm, const void* dy, const void* gamma, const void* xhat, const float* rstd,
                         const void* residual, int n, int h, void* dx, cudaStream_t stream);
// Column sums over the n rows of dy (n x cols): dgamma += sum dy * xhat (when dgamma is not null),
// dbeta += sum dy (when dbeta is not null): the norms' W and a linear bias's gradient.
void column_sums(DType t, const void* dy, const void* xhat, int n, int cols, float* dgamma, float* dbeta,
                 cudaStream_t stream);
// y[r] += bias for every row of y (n x cols); both T.
void add_bias(DType t, void* y, const void* bias, int n, int cols, cudaStream_t stream);

// Attention, head-major: [batch, heads, seq, head_dim]. Splits qkv (n x (q + 2 kv), n = batch seq) into Q,
// K and V with K and V repeated for each query head of their group, rotating Q and K (rotary tables
// cos/sin: seq x head_dim / 2, fp32; null for no rotation).
void attention_split(DType t, const void* qkv, const float* cos, const float* sin, int batch, int seq, int heads,
                     int kv_heads, int head_dim, void* qh, void* kh, void* vh, cudaStream_t stream);
// probs (T) = causal softmax of each row of scores (fp32; rows x seq, row r is position r % seq).
void causal_softmax(DType t, const float* scores, long rows, int seq, void* probs, cudaStream_t stream);
// dscores (T) = probs * (dprobs - rowsum(dprobs * probs)) * scale.
void softmax_backward(DType t, const void* probs, const float* dprobs, float scale, long rows, int seq, void* dscores,
                      cudaStream_t stream);
// [batch, heads, seq, head_dim] (fp32) -> n x heads head_dim (T).
void attention_merge(DType t, const float* oh, int batch, int seq, int heads, int head_dim, void* out, cudaStream_t stream);
// n x heads head_dim (T) -> [batch, heads, seq, head_dim] (T).
void attention_split_grad(DType t, const void* dout, int batch, int seq, int heads, int head_dim, void* doh,
                          cudaStream_t stream);
// Gradients of Q, K, V per query head (fp32, head-major) -> dqkv (n x (q + 2 kv), T): K and V summed over
// each group, Q and K rotated back.
void attention_merge_grad(DType t, const float* dqh, const float* dkh, const float* dvh, const float* cos,
                          const float* sin, int batch, int seq, int heads, int kv_heads, int head_dim, void* dqkv,
                          cudaStream_t stream);

// SwiGLU on u = [gate | up] (n x 2f): g = silu(gate) * up (n x f); backward to du (n x 2f).
void swiglu_forward(DType t, const void* u, long n, int f, void* g, cudaStream_t stream);
void swiglu_backward(DType t, const void* u, const void* dg, long n, int f, void* du, cudaStream_t stream);
// GPT-2's tanh GELU, element-wise over `count` values.
void gelu_forward(DType t, const void* u, long count, void* g, cudaStream_t stream);
void gelu_backward(DType t, const void* u, const void* dg, long count, void* du, cudaStream_t stream);

// Per row of logits (n x vocab, T): lse = log-sum-exp (fp32); *loss += mean over the rows of lse - logit[target].
void cross_entropy_forward(DType t, const void* logits, const int* targets, int n, long vocab, float* lse, float* loss,
                           cudaStream_t stream);
// dlogits (T) = scale (softmax(logits) - one_hot(targets)) / n.
void cross_entropy_backward(DType t, const void* logits, const float* lse, const int* targets, int n, long vocab,
                            float scale, void* dlogits, cudaStream_t stream);

// Type conversions of `count` values.
void cast_from_f32(DType t, const float* src, long count, void* dst, cudaStream_t stream);
void cast_to_f32(DType t, const void* src, long count, float* dst, cudaStream_t stream);

// Optimizer steps on fp32 weights (executor/cpu_model.cpp's formulas); both zero the gradient.
void adam_step(float* w, float* g, float* m, float* v, long count, float lr, float beta1, float beta2, float eps,
               float bias1, float bias2, cudaStream_t stream);
void sgd_step(float* w, float* g, long count, float lr, cudaStream_t stream);

// Tied embeddings (fp32 gradients; a rows x cols, b cols x rows, as the embedding's table and the LM head's
// weight): a[i][j] += b[j][i]; or both made a[i][j] + b[j][i] (one rank holding both copies). The sum is the
// same float either way round, so copies summed on two ranks stay equal.
void add_transposed(float* a, const float* b, long rows, long cols, cudaStream_t stream);
void sum_transposed_pair(float* a, float* b, long rows, long cols, cudaStream_t stream);

// Values from N(0, stddev^2) by a counter-based hash of (seed, index): inputs for the profiler.
void fill_normal(DType t, void* data, long count, std::uint64_t seed, float stddev, cudaStream_t stream);

}  // namespace pw::cuda
