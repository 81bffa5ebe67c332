#include "core/layer_work.hpp"

#include <algorithm>

#include "core/kept_bytes.hpp"
#include "core/error.hpp"

namespace pw {
namespace {

constexpr double kBf16 = 2;  // bytes per activation element
constexpr double kFp32 = 4;  // bytes per logit in the loss
constexpr double kMask = 1;  // bytes per dropout-mask element

// One micro-batch on one tp rank. Sizes are element counts; `t` divides what tp shards. With context
// parallelism `s` is this rank's share of the sequence, s / cp, while its queries attend to `keys` keys
// of the whole sequence.
struct Dims {
  double b, s, h, a, q, kv, f, V, t, cp;
  bool sp;        // sequence parallelism in effect (requested and tp > 1)
  bool dropout;   // dropout masks stored and applied
  bool rotary;    // rotary positions applied to Q and K (no learned position table)
  bool swiglu;
  bool flash;     // fused attention: no s x s tensor in memory

  double n() const { return b * s; }  // tokens
  // Elements of one hidden-size activation in the part tp replicates (norms, dropout, residual
  // adds): the whole sequence without sp, a 1/t shard with it.
  double rep() const { return sp ? n() * h / t : n() * h; }
  // Bytes kept whole by tp without sp, divided by t with it (Korthikanti's "10 s b h" part).
  double replicated(double bytes) const { return sp ? bytes / t : bytes; }
  double keys;    // keys each query attends: s, or the sliding window when shorter
  double attention_matrix() const { return a * s * keys * b / t; }  // elements of the a/t heads' s x keys scores
  double mlp_in() const { return swiglu ? 2 * f : f; }           // up-projection width (gate + up for SwiGLU)
};

Dims dims_of(const TransformerConfig& c, const Workload& w, int default_seq, int window) {
  Dims d{};
  d.b = w.micro_batch_size;
  const double sequence = w.seq_len > 0 ? w.seq_len : default_seq;
  d.cp = w.cp > 1 ? w.cp : 1;
  d.s = sequence / d.cp;
  d.keys = window > 0 ? std::min<double>(sequence, window) : sequence;
  d.h = c.hidden;
  d.a = c.heads;
  d.q = static_cast<double>(c.heads) * c.head_dim;
  d.kv = static_cast<double>(c.kv_heads) * c.head_dim;
  d.f = c.ffn;
  d.V = static_cast<double>(c.vocab);
  d.t = w.tp > 1 ? w.tp : 1;
  d.sp = w.sequence_parallel && w.tp > 1;
  d.dropout = c.dropout;
  d.rotary = !c.learned_positions;
  d.swiglu = gated(c.mlp);
  d.flash = w.flash_attention;
  return d;
}

// An m x k by k x n product whose n (column parallel) or k (row parallel) is split over tp.
void gemm(PhaseWork& p, double m, double k, double n, double t) {
  p.gemm_flops += 2 * m * k * n / t;
  ++p.kernels;
}
void attention_gemm(PhaseWork& p, double flops) {
  p.attention_flops += flops;
  ++p.kernels;
}
void elementwise(PhaseWork& p, double bytes) {
  p.memory_bytes += bytes;
  ++p.kernels;
}
void collective(PhaseWork& p, CollectiveKind kind, double bytes) { p.collectives.push_back({kind, bytes}); }

// The tp collectives around one of the two tp regions of a block (attention, MLP). Forward: the
// row-parallel output is all-reduced, or with sp the input all-gathered and the output
// reduce-scattered. Backward-input mirrors it (the all-gather's gradient is a reduce-scatter and
// vice versa; Megatron's re-gather of the input for the weight gradient overlaps the dgrad GEMM
// and is not charged).
void tp_region_collectives(PhaseWork& p, const Dims& d) {
  if (d.t <= 1) return;
  const double bytes = kBf16 * d.n() * d.h;
  if (d.sp) {
    collective(p, CollectiveKind::AllGather, bytes);
    collective(p, CollectiveKind::ReduceScatter, bytes);
  } else {
    collective(p, CollectiveKind::AllReduce, bytes);
  }
}

// QK^T and AV, each 2 b s^2 (a hd) FLOPs over the whole model width (full, non-causal square, as
// Narayanan counts), on a/t heads per rank.
double attention_core_flops(const Dims& d) { return 2 * (2 * d.b * d.s * d.keys * d.q) / d.t; }

// Context parallelism's ring (Megatron's default cp_comm_type p2p, Transformer Engine's ring attention):
// each of cp - 1 steps passes this rank's K and V chunk to the next rank while the attention of the chunk
// it holds runs; B passes K and V again and their gradients dK and dV, twice the bytes.
double cp_kv_chunk_bytes(const Dims& d) { return 2 * kBf16 * d.n() * d.kv / d.t; }
void cp_ring(PhaseWork& p, const Dims& d, double chunks) {
  if (d.cp <= 1) return;
  p.cp_ring_steps = static_cast<int>(d.cp) - 1;
  p.cp_ring_step_bytes = chunks * cp_kv_chunk_bytes(d);
}

// Elementwise traffic of the attention core in F: the fused scale-mask-softmax reads the bf16 scores
// and writes the probabilities (2 + 2 bytes per element); dropout on them reads 2, writes 2 and a
// 1-byte mask.
double softmax_bytes(const Dims& d) { return 2 * kBf16 * d.attention_matrix(); }
double attention_dropout_bytes(const Dims& d) { return (2 * kBf16 + kMask) * d.attention_matrix(); }

PhaseWork block_forward(const Dims& d) {
  PhaseWork p;
  const double n = d.n();
  const double rep = d.rep();
  // Norm: read x, write y (bf16). Bias-dropout-add: read the projection output and the residual,
  // write the sum, plus a 1-byte mask with dropout. Linear biases are fused into GEMM epilogues.
  const double norm = 2 * kBf16 * rep;
  const double residual = 3 * kBf16 * rep + (d.dropout ? kMask * rep : 0);

  elementwise(p, norm);                                  // input norm
  gemm(p, n, d.h, d.q + 2 * d.kv, d.t);                  // QKV projection (column parallel)
  if (d.rotary) elementwise(p, 2 * kBf16 * n * (d.q + d.kv) / d.t);  // rotary on Q and K: read + write
  if (d.flash) {
    attention_gemm(p, attention_core_flops(d));          // one fused kernel; scores stay on chip
    cp_ring(p, d, 1);
  } else {
    attention_gemm(p, attention_core_flops(d) / 2);      // QK^T
    elementwise(p, softmax_bytes(d));                    // scale, mask, softmax
    if (d.dropout) elementwise(p, attention_dropout_bytes(d));
    attention_gemm(p, attention_core_flops(d) / 2);      // probabilities x V
  }
  gemm(p, n, d.q, d.h, d.t);                             // output projection (row parallel)
  tp_region_collectives(p, d);
  elementwise(p, residual);                              // bias-dropout-add
  elementwise(p, norm);                                  // post-attention norm
  gemm(p, n, d.h, d.mlp_in(), d.t);                      // up (GeLU) or fused gate+up (SwiGLU)
  // GeLU reads its input and writes its output; SwiGLU reads gate and up, writes their product.
  elementwise(p, (d.swiglu ? 3 : 2) * kBf16 * n * d.f / d.t);
  gemm(p, n, d.f, d.h, d.t);                             // down projection (row parallel)
  tp_region_collectives(p, d);
  elementwise(p, residual);                              // bias-dropout-add
  return p;
}

PhaseWork block_backward_input(const Dims& d) {
  PhaseWork p;
  const double n = d.n();
  const double rep = d.rep();
  // Norm backward with the residual gradient folded in: read x, dy and the residual gradient,
  // write dx. Dropout backward: read the gradient and the mask, write the gradient.
  const double norm = 4 * kBf16 * rep;
  const double dropout = (2 * kBf16 + kMask) * rep;

  if (d.dropout) elementwise(p, dropout);                // MLP output dropout
  gemm(p, n, d.h, d.f, d.t);                             // down projection dgrad
  // GeLU backward reads input and gradient, writes the gradient; SwiGLU reads gate, up and the
  // product's gradient, writes both input gradients.
  elementwise(p, (d.swiglu ? 5 : 3) * kBf16 * n * d.f / d.t);
  gemm(p, n, d.mlp_in(), d.h, d.t);                      // up projection dgrad
  tp_region_collectives(p, d);
  elementwise(p, norm);                                  // post-attention norm backward
  if (d.dropout) elementwise(p, dropout);                // attention output dropout
  gemm(p, n, d.h, d.q, d.t);                             // output projection dgrad
  if (d.flash) {
    // FlashAttention-2's backward recomputes S = QK^T, then dV, dP, dQ, dK: 5 of the forward's
    // half-size products, in one kernel.
    attention_gemm(p, 2.5 * attention_core_flops(d));
    cp_ring(p, d, 2);
  } else {
    attention_gemm(p, attention_core_flops(d) / 2);      // dP = dO V^T
    attention_gemm(p, attention_core_flops(d) / 2);      // dV = P^T dO
    if (d.dropout) elementwise(p, attention_dropout_bytes(d));
    elementwise(p, 3 * kBf16 * d.attention_matrix());    // softmax backward: read P, dP, write dS
    attention_gemm(p, attention_core_flops(d) / 2);      // dQ = dS K
    attention_gemm(p, attention_core_flops(d) / 2);      // dK = dS^T Q
  }
  if (d.rotary) elementwise(p, 2 * kBf16 * n * (d.q + d.kv) / d.t);
  gemm(p, n, d.q + 2 * d.kv, d.h, d.t);                  // QKV dgrad
  tp_region_collectives(p, d);
  elementwise(p, norm);                                  // input norm backward
  return p;
}

// Weight gradients are GEMMs of the stored inputs with the output gradients; bias gradients are
// fused into their epilogues (cuBLASLt BGRADB) and norm weight gradients into the norm backward.
PhaseWork block_backward_weight(const Dims& d) {
  PhaseWork p;
  const double n = d.n();
  gemm(p, d.h, n, d.q + 2 * d.kv, d.t);
  gemm(p, d.q, n, d.h, d.t);
  gemm(p, d.h, n, d.mlp_in(), d.t);
  gemm(p, d.f, n, d.h, d.t);
  return p;
}

// Selective recomputation reruns the attention core: QK^T, softmax (and its dropout), AV.
PhaseWork attention_core_recompute(const Dims& d) {
  PhaseWork p;
  attention_gemm(p, attention_core_flops(d) / 2);
  elementwise(p, softmax_bytes(d));
  if (d.dropout) elementwise(p, attention_dropout_bytes(d));
  attention_gemm(p, attention_core_flops(d) / 2);
  return p;
}

// Activations a block stores at F (Korthikanti et al. 2022, generalised to GQA and SwiGLU). Bytes.
void block_memory(LayerWork& lw, const Dims& d, Recompute recompute) {
  const double sbh = d.s * d.b * d.h;
  const double sb = d.s * d.b;
  if (recompute == Recompute::Full) {
    // Only the layer input is kept; the rest is rebuilt in B. The GEMM inputs W needs are then
    // produced in B, so nothing stored at F waits for W.
    lw.activation_bytes = d.replicated(kBf16 * sbh);
    lw.weight_grad_bytes = 0;
    return;
  }
  // Whole with tp and no sp: the two norm inputs, the QKV and MLP inputs (norm outputs), and the
  // two 1-byte dropout masks after the attention and MLP output projections.
  const double whole = 2 * kBf16 * sbh + kBf16 * sbh + kBf16 * sbh + (d.dropout ? 2 * kMask * sbh : 0);
  // Sharded by tp: Q, K, V; the output projection input; the MLP's inner tensors (GeLU input and
  // output, or SwiGLU gate, up and product).
  const double qkv = kBf16 * sb * d.q + 2 * kBf16 * sb * d.kv;
  const double out_proj_in = kBf16 * sb * d.q;
  const double mlp = (d.swiglu ? 3 : 2) * kBf16 * sb * d.f;
  // The s^2 term: scores 2 bytes, softmax output 2 bytes and, with dropout, the 1-byte mask
  // (5 a s^2 b as Korthikanti counts; 4 a s^2 b without dropout). Gone with selective recompute.
  // Fused attention keeps only the fp32 log-sum-exp per head and token instead.
  const double scores = d.flash                            ? kFp32 * d.a * d.s * d.b
                        : recompute == Recompute::Selective ? 0
                                                            : (2 * kBf16 + (d.dropout ? kMask : 0)) * d.a * d.s * d.keys * d.b;
  const double sharded = qkv + out_proj_in + mlp + scores;
  lw.activation_bytes = d.sp ? (whole + sharded) / d.t : whole + sharded / d.t;
  // W needs the inputs of its four GEMMs: QKV input, output projection input, MLP input and the
  // down projection input (GeLU output or SwiGLU product).
  lw.weight_grad_bytes = d.replicated(2 * kBf16 * sbh) + (out_proj_in + kBf16 * sb * d.f) / d.t;
}

// What a block's F or B holds beyond its stored activations while it runs (per tp rank, bytes): B's,
// the larger.
//   F: full recompute computes every activation and keeps only the input; selective recompute without
//      fused attention computes the s x s scores, softmax and mask and drops them.
//   B: rebuilds the same, and makes the gradients of the unfused s x s softmax and scores (2 bytes each)
//      and of the MLP's inner tensor.
double block_working(const Dims& d, Recompute recompute, double stored) {
  LayerWork none;
  block_memory(none, d, Recompute::None);
  const double s2 = d.attention_matrix();
  const double dropped = recompute == Recompute::Full                    ? none.activation_bytes - stored
                         : recompute == Recompute::Selective && !d.flash ? (2 * kBf16 + (d.dropout ? kMask : 0)) * s2
                                                                          : 0.0;
  const double gradients = (d.flash ? 0.0 : 2 * kBf16 * s2) + kBf16 * d.n() * d.mlp_in() / d.t;
  // The cp ring's chunks in flight in B: the K, V, dK and dV received while the last ones are used.
  const double ring = d.cp > 1 ? 2 * 2 * cp_kv_chunk_bytes(d) : 0.0;
  return dropped + gradients + ring;  // B's: F holds only what it drops
}

// Transformer Engine's fp8 linear layers: the four GEMMs of a block (QKV, output projection, up, down)
// in F, B and W run at the fp8 rate; each GEMM input in F and each output gradient in B is cast first
// (read 2 bytes, write 1, the amax taken in the same pass); the inputs W needs are kept as those fp8
// copies, half the bytes.
void run_gemms_in_fp8(LayerWork& lw, const Dims& d) {
  for (PhaseWork* p : {&lw.forward, &lw.backward_input, &lw.backward_weight, &lw.recompute}) {
    p->fp8_gemm_flops += p->gemm_flops;
    p->gemm_flops = 0;
  }
  constexpr double kCast = kBf16 + 1;
  const double n = d.n();
  const double forward_inputs = 2 * n * d.h + n * d.q / d.t + n * d.f / d.t;
  const double output_grads = 2 * n * d.h + n * (d.q + 2 * d.kv) / d.t + n * d.mlp_in() / d.t;
  elementwise(lw.forward, kCast * forward_inputs);
  if (lw.recompute.fp8_gemm_flops > 0) elementwise(lw.recompute, kCast * forward_inputs);
  elementwise(lw.backward_input, kCast * output_grads);
  lw.activation_bytes -= lw.weight_grad_bytes / 2;
  lw.weight_grad_bytes /= 2;
  lw.fp8 = true;
}

LayerWork block_work(const Dims& d, Recompute recompute) {
  LayerWork lw;
  lw.forward = block_forward(d);
  lw.backward_input = block_backward_input(d);
  lw.backward_weight = block_backward_weight(d);
  if (recompute == Recompute::Full) lw.recompute = lw.forward;
  // Fused attention stores no scores, so selective recomputation has nothing left to rebuild.
  if (recompute == Recompute::Selective && !d.flash) lw.recompute = attention_core_recompute(d);
  block_memory(lw, d, recompute);
  lw.working_bytes = block_working(d, recompute, lw.activation_bytes);
  return lw;
}

LayerWork embedding_work(const Dims& d, bool learned_positions) {
  LayerWork lw;
  const double n = d.n();
  const double rep = d.rep();
  const double bytes = kBf16 * n * d.h;
  // Vocab-parallel gather: each rank reads the rows of its vocabulary slice (n/t tokens on average)
  // and writes the whole (zero-filled elsewhere) output before the tp reduction.
  elementwise(lw.forward, kBf16 * n * d.h / d.t + kBf16 * n * d.h);
  if (d.t > 1) collective(lw.forward, d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, bytes);
  if (learned_positions) elementwise(lw.forward, 3 * kBf16 * rep);  // read x and positions, write
  if (d.dropout) elementwise(lw.forward, (2 * kBf16 + kMask) * rep);
  // No input gradient: the whole backward is the weight gradient. With sp the gradient of the
  // reduce-scatter is an all-gather.
  if (d.dropout) elementwise(lw.backward_weight, (2 * kBf16 + kMask) * rep);
  if (d.t > 1 && d.sp) collective(lw.backward_weight, CollectiveKind::AllGather, bytes);
  if (learned_positions) elementwise(lw.backward_weight, kBf16 * rep);  // sum over the batch
  // Scatter-add into the fp32 gradient rows of this rank's vocabulary slice: read dy, read and
  // write the rows.
  elementwise(lw.backward_weight, kBf16 * n * d.h + 2 * kFp32 * n * d.h / d.t);
  lw.activation_bytes = d.dropout ? d.replicated(kMask * d.s * d.b * d.h) : 0;
  lw.output_bytes = kBf16 * n * d.h / d.t;
  return lw;
}

LayerWork head_work(const Dims& d) {
  LayerWork lw;
  const double n = d.n();
  const double rep = d.rep();
  const double logits = n * d.V / d.t;  // this rank's vocabulary slice
  const double hidden_bytes = kBf16 * n * d.h;

  elementwise(lw.forward, 2 * kBf16 * rep);  // final norm
  if (d.t > 1 && d.sp) collective(lw.forward, CollectiveKind::AllGather, hidden_bytes);
  gemm(lw.forward, n, d.h, d.V, d.t);  // LM head (column parallel over the vocabulary)
  // Vocab-parallel cross-entropy over fp32 logits: convert (read 2, write 4), max (read 4),
  // subtract (read 4, write 4), predicted logit (negligible), exp (read 4, write 4), sum (read 4),
  // loss (per token); each reduction is an all-reduce of one fp32 per token.
  elementwise(lw.forward, (kBf16 + kFp32) * logits);
  elementwise(lw.forward, kFp32 * logits);
  elementwise(lw.forward, 2 * kFp32 * logits);
  elementwise(lw.forward, 0);
  elementwise(lw.forward, 2 * kFp32 * logits);
  elementwise(lw.forward, kFp32 * logits);
  elementwise(lw.forward, 0);
  if (d.t > 1)
    for (int i = 0; i < 3; ++i) collective(lw.forward, CollectiveKind::AllReduce, kFp32 * n);

  // Loss gradient: softmax minus one-hot times the incoming gradient (read 4, write 4), then to
  // bf16 for the GEMM (read 4, write 2).
  elementwise(lw.backward_input, 2 * kFp32 * logits);
  elementwise(lw.backward_input, (kFp32 + kBf16) * logits);
  gemm(lw.backward_input, n, d.V, d.h, d.t);  // LM head dgrad
  if (d.t > 1)
    collective(lw.backward_input, d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, hidden_bytes);
  elementwise(lw.backward_input, 3 * kBf16 * rep);  // final norm backward: read x, dy, write dx
  gemm(lw.backward_weight, d.h, n, d.V, d.t);       // LM head wgrad

  // Final norm input and LM head input (whole without sp), fp32 logits.
  const double sbh = d.s * d.b * d.h;
  lw.weight_grad_bytes = d.replicated(kBf16 * sbh);
  lw.activation_bytes = d.replicated(kBf16 * sbh) + lw.weight_grad_bytes + kFp32 * d.s * d.b * d.V / d.t;
  // The bf16 logits out of the GEMM before the fp32 cross-entropy, and in B the bf16 logit gradient for
  // the dgrad and wgrad GEMMs (the fp32 gradient is made in place over the stored softmax).
  lw.working_bytes = kBf16 * logits;
  lw.output_bytes = 0;
  return lw;
}

LayerWork explicit_work(const ExplicitCosts& c) {
  LayerWork lw;
  lw.forward_s = c.forward_s;
  lw.backward_input_s = c.backward_input_s;
  lw.backward_weight_s = c.backward_weight_s;
  lw.activation_bytes = c.activation_bytes;
  lw.output_bytes = c.output_bytes;
  lw.parameters = c.parameter_bytes / 2;  // bf16 weights: two bytes a parameter
  return lw;
}

}  // namespace

LayerWork layer_work(const Model& model, const Layer& layer, const Workload& w) {
  if (layer.kind == LayerKind::Explicit) {
    if (!layer.explicit_costs) throw_runtime("layer '{}' of model '{}' has no costs", layer.name, model.name);
    LayerWork lw = explicit_work(*layer.explicit_costs);
    lw.micro_batch_size = w.micro_batch_size;
    lw.seq_len = w.seq_len > 0 ? w.seq_len : model.default_seq_len();
    lw.recompute_mode = w.recompute;
    return lw;
  }
  if (!model.transformer) throw_runtime("layer '{}' of model '{}' has no transformer shape", layer.name, model.name);
  if (w.recompute == Recompute::PerStage)
    throw_runtime("layer_work: per-stage recompute needs the level of the stage holding layer '{}'", layer.name);
  const TransformerConfig& c = *model.transformer;
  const Dims d = dims_of(c, w, model.default_seq_len(), c.block_window(layer.block));
  LayerWork lw;
  switch (layer.kind) {
    case LayerKind::Embedding: lw = embedding_work(d, c.learned_positions); break;
    case LayerKind::Head: lw = head_work(d); break;
    default:
      lw = block_work(d, w.recompute);
      if (w.precision == Precision::Fp8) run_gemms_in_fp8(lw, d);
      break;
  }
  if (layer.kind == LayerKind::Block) lw.output_bytes = kBf16 * d.n() * d.h / d.t;
  if (w.memory != MemoryAccounting::GpuBf16) {
    const KeptLayout layout = w.memory == MemoryAccounting::CpuFloat32 ? kCpuKeptLayout
                              : cuda_kept_layout(w.memory == MemoryAccounting::CudaBf16 ? 2 : 4);
    const KeptBytes kept = kept_bytes(c, layer.kind, w.micro_batch_size, static_cast<int>(d.s), w.recompute, layout);
    lw.activation_bytes = kept.after_forward;
    lw.weight_grad_bytes = kept.after_backward;
    lw.output_bytes = kept.output;
    lw.working_bytes = 0;
  }
  lw.parameters = transformer_layer_parameters(c, layer.kind, static_cast<int>(d.t));
  lw.micro_batch_size = w.micro_batch_size;
  lw.seq_len = static_cast<int>(d.s * d.cp);
  lw.cp = static_cast<int>(d.cp);
  lw.recompute_mode = w.recompute;
  return lw;
}

double model_flops_per_microbatch(const Model& model, const Workload& w) {
  Workload whole = w;
  whole.tp = 1;  // all tp and cp ranks together
  whole.cp = 1;
  double flops = 0;
  for (const Layer& layer : model.layers) {
    const LayerWork lw = layer_work(model, layer, whole);
    flops += lw.forward.flops() + lw.backward_input.flops() + lw.backward_weight.flops();
  }
  return flops;
}

double hardware_flops_per_microbatch(const Model& model, const Workload& w) {
  Workload whole = w;
  whole.tp = 1;
  whole.cp = 1;
  double flops = 0;
  for (const Layer& layer : model.layers) {
    const LayerWork lw = layer_work(model, layer, whole);
    flops += lw.forward.flops() + lw.backward_input.flops() + lw.backward_weight.flops() + lw.recompute.flops();
  }
  return flops;
}

void check_tensor_parallel(const Model& model, int tp) {
  if (tp < 1) throw_bad_input("--tp: {} is not a positive number of GPUs", tp);
  if (!model.transformer || tp == 1) return;
  const TransformerConfig& c = *model.transformer;
  if (c.heads % tp != 0)
    throw_bad_input("--tp: {} does not divide the {} attention heads of '{}'; use a divisor of {}", tp, c.heads,
                    model.name, c.heads);
  if (c.kv_heads % tp != 0)
    throw_bad_input("--tp: {} does not divide the {} KV heads of '{}'; use a divisor of {}", tp, c.kv_heads,
                    model.name, c.kv_heads);
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

bool collective_from_name(const std::string& name, CollectiveKind& kind) {
  for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter})
    if (name == collective_name(k)) {
      kind = k;
      return true;
    }
  return false;
}

}  // namespace pw
