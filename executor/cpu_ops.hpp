#pragma once
// The float32 building blocks of the CPU layers, each forward with its backward. Backward-input and
// backward-weight are separate functions so that a layer can run B now and W later.
#include <vector>

#include "core/model.hpp"
#include "executor/cpu_tensor.hpp"

namespace pw::ops {

constexpr float kNormEps = 1e-5f;

// LayerNorm ((x - mean) / std * gamma + beta) or RMSNorm (x / rms * gamma) over each row. Keeps the
// normalised input `xhat` and each row's 1 / std (or 1 / rms) in `rstd` (n x 1) for the backward.
Mat norm_forward(const Mat& x, const Mat& gamma, const Mat* beta, NormKind kind, Mat& xhat, Mat& rstd);
Mat norm_backward_input(const Mat& dy, const Mat& gamma, const Mat& xhat, const Mat& rstd, NormKind kind);
// dgamma += sum over rows of dy * xhat; dbeta += sum over rows of dy.
void norm_backward_weight(const Mat& dy, const Mat& xhat, Mat& dgamma, Mat* dbeta);

// y = x w + b (w is in x out, b is 1 x out); dx = dy w^T; dw += x^T dy, db += sum over rows of dy.
Mat linear_forward(const Mat& x, const Mat& w, const Mat* b);
Mat linear_backward_input(const Mat& dy, const Mat& w);
void linear_backward_weight(const Mat& x, const Mat& dy, Mat& dw, Mat* db);

// GPT-2's tanh approximation of GELU.
Mat gelu(const Mat& u);
Mat gelu_backward(const Mat& u, const Mat& dy);
// SwiGLU on u = [gate | up] (n x 2f): silu(gate) * up (n x f); the backward returns [dgate | dup].
Mat swiglu(const Mat& u);
Mat swiglu_backward(const Mat& u, const Mat& dy);

struct AttentionShape {
  int batch = 1;     // sequences in the micro-batch
  int seq = 1;       // tokens per sequence
  int heads = 1;     // query heads
  int kv_heads = 1;  // key/value heads; query head j reads key/value head j / (heads / kv_heads)
  int head_dim = 1;
};

// Rotary position embedding (rotate-half form, base 10000) applied in place to each head of x
// (n x heads * head_dim); `inverse` rotates back, which is also the backward of the rotation.
void rotary(Mat& x, int heads, int head_dim, int seq, bool inverse);

// The same rotation of row r by positions[r] (serving: each sequence's chunk at its own offset).
void rotary_at(Mat& x, int heads, int head_dim, const std::vector<long>& positions);

// Causal attention of one sequence's chunk: q holds its rows for positions start, start + 1, ...; k and v
// hold its cached keys and values for positions 0 .. start + q.rows() - 1 (and maybe more rows, unread).
// shape.batch and shape.seq are unused.
Mat cached_attention(const Mat& q, const Mat& k, const Mat& v, long start, const AttentionShape& shape);

// The causal softmax(q k^T / sqrt(head_dim)) of every sequence and head, (batch * heads * seq) x seq: what
// the backward needs, and what selective recomputation rebuilds in B.
Mat attention_probs(const Mat& q, const Mat& k, const AttentionShape& shape);
// Causal softmax(q k^T / sqrt(head_dim)) v per sequence and head; `probs` keeps the softmax
// (attention_probs) for the backward.
Mat attention_forward(const Mat& q, const Mat& k, const Mat& v, const AttentionShape& shape, Mat& probs);
void attention_backward(const Mat& dout, const Mat& q, const Mat& k, const Mat& v, const Mat& probs,
                        const AttentionShape& shape, Mat& dq, Mat& dk, Mat& dv);

// Mean cross-entropy of the rows of `logits` against `targets`; `probs` keeps the softmax.
double cross_entropy_forward(const Mat& logits, const std::vector<int>& targets, Mat& probs);
// d(scale x mean loss) / d(logits) = scale x (probs - one_hot(targets)) / rows.
Mat cross_entropy_backward(const Mat& probs, const std::vector<int>& targets, double scale);

}  // namespace pw::ops
