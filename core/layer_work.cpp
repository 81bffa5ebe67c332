#include "core/layer_work.hpp"

#include <algorithm>

#include "core/kept_bytes.hpp"
#include "core/layer_dims.hpp"
#include "core/layer_works.hpp"
#include "core/error.hpp"

namespace pw {
namespace {

using namespace detail;

Dims dims_of(const TransformerConfig& c, const Workload& w, int default_seq, int block) {
  Dims d{};
  d.b = w.micro_batch_size;
  const double sequence = w.seq_len > 0 ? w.seq_len : default_seq;
  d.cp = w.cp > 1 ? w.cp : 1;
  d.s = sequence / d.cp;
  const int window = c.block_window(block);
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
  // Megatron-Core's fused SwiGLU keeps its input in fp8 when asked (resolve() refuses the flag elsewhere).
  d.act_in = w.activation_fp8_input_store && c.mlp == MlpKind::SwiGlu ? 1 : kBf16;
  if (c.mla) {
    // MLA: queries (through their latent when q_lora_rank is set) and the KV latent with the shared rotary
    // key; keys of qk_head_dim and values of v_head_dim per head, rebuilt from the latent.
    const MlaConfig& m = *c.mla;
    const double heads = c.heads;
    d.q = heads * m.qk_head_dim();
    d.o = heads * m.v_head_dim;
    d.k_stored = d.q;
    d.v_stored = d.o;
    d.rope = heads * m.qk_rope_head_dim + m.qk_rope_head_dim;
    d.latent = m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim;
    if (m.q_lora_rank > 0)
      d.in_proj = {{d.h, static_cast<double>(m.q_lora_rank), false}, {static_cast<double>(m.q_lora_rank), d.q, true}};
    else
      d.in_proj = {{d.h, d.q, true}};
    d.in_proj.push_back({d.h, static_cast<double>(m.kv_lora_rank + m.qk_rope_head_dim), false});
    d.in_proj.push_back({static_cast<double>(m.kv_lora_rank), heads * (m.qk_nope_head_dim + m.v_head_dim), true});
  } else {
    d.o = d.q;
    d.k_stored = d.kv;
    d.v_stored = d.kv;
    d.rope = d.q + d.kv;
    d.latent = 0;
    d.in_proj = {{d.h, d.q + 2 * d.kv, true}};
  }
  if (c.moe_block(block)) {
    const MoeConfig& m = *c.moe;
    RoutedShape& r = d.routed;
    d.moe = true;
    r.experts = m.experts;
    r.ep = std::max(w.ep, 1);
    r.etp = std::max(w.etp, 1);
    r.local = r.experts / r.ep;
    r.k = m.top_k;
    r.f = m.expert_ffn;
    r.shared_f = m.shared_expert_ffn;
    r.shared_gate = m.shared_expert_gate;
    r.capacity = w.capacity_factor;
    r.node_dedup = w.dispatcher == Workload::Dispatcher::Flex;
    r.groups = m.groups;
    r.top_groups = m.top_groups;
    r.pairs = d.tokens_per_rank() * r.k * r.etp * (r.capacity > 0 ? r.capacity : 1.0);
  }
  return d;
}

}  // namespace

namespace detail {

double projection_split(const Projection& pr, const Dims& d) { return pr.split ? d.t : (d.sp ? d.t : 1); }
// The dimension projection_split divides: `split` for a tp-split projection, the tokens (sequence
// parallelism's share) for one kept whole.
TpSplit in_split(const Projection& pr, TpSplit split) { return pr.split ? split : TpSplit::M; }

double norm_bytes(const Dims& d) { return 2 * kBf16 * d.rep(); }

void cast_activation_input(PhaseWork& p, const Dims& d, double elements) {
  if (d.act_in < kBf16) elementwise(p, (kBf16 + d.act_in) * elements);
}

void dense_mlp_forward(PhaseWork& p, const Dims& d) {
  const double n = d.n();
  gemm(p, n, d.h, d.mlp_in(), d.t, TpSplit::N);         // up (GeLU) or fused gate+up (SwiGLU)
  // GeLU reads its input and writes its output; SwiGLU reads gate and up, writes their product.
  elementwise(p, (d.swiglu ? 3 : 2) * kBf16 * n * d.f / d.t);
  cast_activation_input(p, d, n * d.mlp_in() / d.t);
  gemm(p, n, d.f, d.h, d.t, TpSplit::K);                // down projection (row parallel)
  tp_region_collectives(p, d);
}

}  // namespace detail

namespace {

void attention_gemm(PhaseWork& p, double flops) {
  p.attention_flops += flops;
  ++p.kernels;
}

// A fused attention kernel of `flops`: its shape recorded for a table-priced cost model.
void fused_attention(PhaseWork& p, const Dims& d, double flops, bool backward) {
  attention_gemm(p, flops);
  FusedAttention a;
  a.batch = static_cast<int>(d.b);
  a.seq = static_cast<int>(d.s);
  a.keys = static_cast<int>(d.keys);
  a.heads = static_cast<int>(d.a / d.t);
  a.head_dim = static_cast<int>(d.q / d.a);
  a.kv_heads = static_cast<int>(d.kv / a.head_dim / d.t);
  a.cp = static_cast<int>(d.cp);
  a.mla = d.latent > 0;
  a.backward = backward;
  a.flops = flops;
  p.attentions.push_back(a);
}

// QK^T (queries and keys q wide) and AV (values o wide), each 2 b s keys width FLOPs over the whole model
// width (full, non-causal square, as Narayanan counts), on a/t heads per rank.
double attention_core_flops(const Dims& d) { return 2 * d.b * d.s * d.keys * (d.q + d.o) / d.t; }

// Context parallelism's ring (Megatron's default cp_comm_type p2p, Transformer Engine's ring attention):
// each of cp - 1 steps passes this rank's K and V chunk to the next rank while the attention of the chunk
// it holds runs; B passes K and V again and their gradients dK and dV, twice the bytes.
double cp_kv_chunk_bytes(const Dims& d) { return kBf16 * d.n() * (d.k_stored + d.v_stored) / d.t; }
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

// Bias-dropout-add: read the projection output and the residual, write the sum, plus a 1-byte mask with
// dropout. Linear biases are fused into GEMM epilogues.
double residual_bytes(const Dims& d) { return 3 * kBf16 * d.rep() + (d.dropout ? kMask * d.rep() : 0); }

void attention_forward(PhaseWork& p, const Dims& d) {
  const double n = d.n();
  elementwise(p, norm_bytes(d));                         // input norm
  for (const Projection& pr : d.in_proj) gemm(p, n, pr.in, pr.out, projection_split(pr, d), in_split(pr, TpSplit::N));  // QKV (column parallel)
  if (d.latent > 0) elementwise(p, 2 * kBf16 * n * d.latent / (d.sp ? d.t : 1));  // MLA's latent norms
  if (d.rotary) elementwise(p, 2 * kBf16 * n * d.rope / d.t);  // rotary on Q and K: read + write
  if (d.flash) {
    fused_attention(p, d, attention_core_flops(d), false);  // one fused kernel; scores stay on chip
    cp_ring(p, d, 1);
  } else {
    attention_gemm(p, attention_core_flops(d) / 2);      // QK^T
    elementwise(p, softmax_bytes(d));                    // scale, mask, softmax
    if (d.dropout) elementwise(p, attention_dropout_bytes(d));
    attention_gemm(p, attention_core_flops(d) / 2);      // probabilities x V
  }
  gemm(p, n, d.o, d.h, d.t, TpSplit::K);                // output projection (row parallel)
  tp_region_collectives(p, d);
  elementwise(p, residual_bytes(d));                     // bias-dropout-add
}

PhaseWork block_forward(const Dims& d) {
  PhaseWork p;
  attention_forward(p, d);
  elementwise(p, norm_bytes(d));                         // post-attention norm
  if (d.moe)
    moe_forward(p, d);
  else
    dense_mlp_forward(p, d);
  elementwise(p, residual_bytes(d));                     // bias-dropout-add
  return p;
}

// Norm backward with the residual gradient folded in: read x, dy and the residual gradient, write dx.
// Dropout backward: read the gradient and the mask, write the gradient.
double norm_backward_bytes(const Dims& d) { return 4 * kBf16 * d.rep(); }
double dropout_backward_bytes(const Dims& d) { return (2 * kBf16 + kMask) * d.rep(); }

void dense_mlp_backward_input(PhaseWork& p, const Dims& d) {
  const double n = d.n();
  gemm(p, n, d.h, d.f, d.t, TpSplit::N);                // down projection dgrad
  // GeLU backward reads input and gradient, writes the gradient; SwiGLU reads gate, up and the
  // product's gradient, writes both input gradients.
  cast_activation_input(p, d, n * d.mlp_in() / d.t);
  elementwise(p, (d.swiglu ? 5 : 3) * kBf16 * n * d.f / d.t);
  gemm(p, n, d.mlp_in(), d.h, d.t, TpSplit::K);         // up projection dgrad
  tp_region_collectives(p, d);
}

void attention_backward_input(PhaseWork& p, const Dims& d) {
  const double n = d.n();
  if (d.dropout) elementwise(p, dropout_backward_bytes(d));  // attention output dropout
  gemm(p, n, d.h, d.o, d.t, TpSplit::N);                // output projection dgrad
  if (d.flash) {
    // FlashAttention-2's backward recomputes S = QK^T, then dV, dP, dQ, dK: 5 of the forward's
    // half-size products, in one kernel.
    fused_attention(p, d, 2.5 * attention_core_flops(d), true);
    cp_ring(p, d, 2);
  } else {
    attention_gemm(p, attention_core_flops(d) / 2);      // dP = dO V^T
    attention_gemm(p, attention_core_flops(d) / 2);      // dV = P^T dO
    if (d.dropout) elementwise(p, attention_dropout_bytes(d));
    elementwise(p, 3 * kBf16 * d.attention_matrix());    // softmax backward: read P, dP, write dS
    attention_gemm(p, attention_core_flops(d) / 2);      // dQ = dS K
    attention_gemm(p, attention_core_flops(d) / 2);      // dK = dS^T Q
  }
  if (d.rotary) elementwise(p, 2 * kBf16 * n * d.rope / d.t);
  if (d.latent > 0) elementwise(p, 3 * kBf16 * n * d.latent / (d.sp ? d.t : 1));
  for (const Projection& pr : d.in_proj) gemm(p, n, pr.out, pr.in, projection_split(pr, d), in_split(pr, TpSplit::K));  // QKV dgrad
  tp_region_collectives(p, d);
  elementwise(p, norm_backward_bytes(d));                // input norm backward
}

PhaseWork block_backward_input(const Dims& d) {
  PhaseWork p;
  if (d.dropout) elementwise(p, dropout_backward_bytes(d));  // MLP output dropout
  if (d.moe)
    moe_backward_input(p, d);
  else
    dense_mlp_backward_input(p, d);
  elementwise(p, norm_backward_bytes(d));                // post-attention norm backward
  attention_backward_input(p, d);
  return p;
}

// Weight gradients are GEMMs of the stored inputs with the output gradients; bias gradients are
// fused into their epilogues (cuBLASLt BGRADB) and norm weight gradients into the norm backward.
PhaseWork block_backward_weight(const Dims& d) {
  PhaseWork p;
  const double n = d.n();
  for (const Projection& pr : d.in_proj) gemm(p, pr.in, n, pr.out, projection_split(pr, d), pr.split ? TpSplit::N : TpSplit::K);
  gemm(p, d.o, n, d.h, d.t, TpSplit::M);
  if (d.moe) {
    moe_backward_weight(p, d);
  } else {
    gemm(p, d.h, n, d.mlp_in(), d.t, TpSplit::N);
    gemm(p, d.f, n, d.h, d.t, TpSplit::M);
  }
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

// Activations a block stores at F (Korthikanti et al. 2022, generalised to GQA, SwiGLU, MLA and routed
// experts). Bytes.
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
  const double qkv = kBf16 * sb * (d.q + d.k_stored + d.v_stored);
  const double out_proj_in = kBf16 * sb * d.o;
  const double mlp = d.moe ? 0 : dense_mlp_stored_bytes(d) * sb * d.f;
  // The s^2 term: scores 2 bytes, softmax output 2 bytes and, with dropout, the 1-byte mask
  // (5 a s^2 b as Korthikanti counts; 4 a s^2 b without dropout). Gone with selective recompute.
  // Fused attention keeps only the fp32 log-sum-exp per head and token instead.
  const double scores = d.flash                            ? kFp32 * d.a * d.s * d.b
                        : recompute == Recompute::Selective ? 0
                                                            : (2 * kBf16 + (d.dropout ? kMask : 0)) * d.a * d.s * d.keys * d.b;
  // MLA's latents (the up projections' inputs), computed whole on each rank's tokens.
  const double latents = d.replicated(kBf16 * sb * d.latent);
  const double sharded = qkv + out_proj_in + mlp + scores;
  const MoeMemory moe = d.moe ? moe_memory(d) : MoeMemory{};
  lw.activation_bytes = (d.sp ? (whole + sharded) / d.t : whole + sharded / d.t) + latents + moe.stored;
  // W needs the inputs of its GEMMs: QKV input, output projection input, MLP input and the
  // down projection input (GeLU output or SwiGLU product); MLA's latents; the experts' inputs.
  lw.weight_grad_bytes = d.replicated(2 * kBf16 * sbh) + (out_proj_in + (d.moe ? 0 : kBf16 * sb * d.f)) / d.t + latents +
                         moe.weight_grad;
}

// What a block's F or B holds beyond its stored activations while it runs (per tp rank, bytes): B's,
// the larger.
//   F: full recompute computes every activation and keeps only the input; selective recompute without
//      fused attention computes the s x s scores, softmax and mask and drops them.
//   B: rebuilds the same, and makes the gradients of the unfused s x s softmax and scores (2 bytes each)
//      and of the MLP's inner tensor (the experts': their copies in flight too).
double block_working(const Dims& d, Recompute recompute, double stored) {
  LayerWork none;
  block_memory(none, d, Recompute::None);
  const double s2 = d.attention_matrix();
  const double dropped = recompute == Recompute::Full                    ? none.activation_bytes - stored
                         : recompute == Recompute::Selective && !d.flash ? (2 * kBf16 + (d.dropout ? kMask : 0)) * s2
                                                                          : 0.0;
  const double mlp_gradient = d.moe ? moe_memory(d).working : kBf16 * d.n() * d.mlp_in() / d.t;
  const double gradients = (d.flash ? 0.0 : 2 * kBf16 * s2) + mlp_gradient;
  // The cp ring's chunks in flight in B: the K, V, dK and dV received while the last ones are used.
  const double ring = d.cp > 1 ? 2 * 2 * cp_kv_chunk_bytes(d) : 0.0;
  return dropped + gradients + ring;  // B's: F holds only what it drops
}

// Transformer Engine's fp8 linear layers: the block's GEMMs (QKV, output projection, up, down, the experts')
// in F, B and W run at the fp8 rate; each GEMM input in F and each output gradient in B is cast first
// (read 2 bytes, write 1, the amax taken in the same pass); the inputs W needs are kept as those fp8
// copies, half the bytes.
void run_gemms_in_fp8(LayerWork& lw, const Dims& d) {
  for (PhaseWork* p : {&lw.forward, &lw.backward_input, &lw.backward_weight, &lw.recompute}) {
    p->fp8_gemm_flops += p->gemm_flops;
    p->gemm_flops = 0;
    for (GemmShape& g : p->gemms) g.fp8 = true;
  }
  constexpr double kCast = kBf16 + 1;
  const double n = d.n();
  double in_proj_out = 0;
  for (const Projection& pr : d.in_proj) in_proj_out += pr.out / projection_split(pr, d);
  const MoeMemory moe = d.moe ? moe_memory(d) : MoeMemory{};
  const double forward_inputs = n * d.h + n * d.o / d.t + (d.moe ? moe.fp8_forward_inputs : n * d.h + n * d.f / d.t);
  const double output_grads = n * d.h + n * in_proj_out + (d.moe ? moe.fp8_output_grads : n * d.h + n * d.mlp_in() / d.t);
  elementwise(lw.forward, kCast * forward_inputs);
  // The recomputed GEMMs cast their inputs again: all of them under full recompute, their share under
  // selective modules.
  if (lw.recompute.fp8_gemm_flops > 0)
    elementwise(lw.recompute, kCast * forward_inputs * lw.recompute.fp8_gemm_flops / lw.forward.fp8_gemm_flops);
  elementwise(lw.backward_input, kCast * output_grads);
  lw.activation_bytes -= lw.weight_grad_bytes / 2;
  lw.weight_grad_bytes /= 2;
  lw.fp8 = true;
}

LayerWork block_work(const Dims& d, Recompute recompute, RecomputeModules modules) {
  LayerWork lw;
  lw.forward = block_forward(d);
  lw.backward_input = block_backward_input(d);
  lw.backward_weight = block_backward_weight(d);
  if (recompute == Recompute::Full) lw.recompute = lw.forward;
  // Selective recomputation without the attention core keeps the scores as no recomputation does.
  const bool selective = recompute == Recompute::Selective;
  const Recompute core = selective && !modules.has(RecomputeModule::CoreAttn) ? Recompute::None : recompute;
  // Fused attention stores no scores, so rerunning the attention core has nothing left to rebuild.
  if (core == Recompute::Selective && !d.flash) lw.recompute = attention_core_recompute(d);
  block_memory(lw, d, core);
  lw.working_bytes = block_working(d, core, lw.activation_bytes);
  if (selective) recompute_modules_work(lw, d, modules);
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
  gemm(lw.forward, n, d.h, d.V, d.t, TpSplit::N);  // LM head (column parallel over the vocabulary)
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
  gemm(lw.backward_input, n, d.V, d.h, d.t, TpSplit::K);  // LM head dgrad
  if (d.t > 1)
    collective(lw.backward_input, d.sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, hidden_bytes);
  elementwise(lw.backward_input, 3 * kBf16 * rep);  // final norm backward: read x, dy, write dx
  gemm(lw.backward_weight, d.h, n, d.V, d.t, TpSplit::N);       // LM head wgrad

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

// DeepSeek-V3's MTP module (one prediction depth): the next tokens' embeddings looked up (its own copy of
// the table), the last hidden state and those embeddings normed, concatenated and projected 2h -> h
// (column parallel), one block, and a loss through the shared LM head. It passes the main model's hidden
// state on to the head, and its own to the next depth.
LayerWork mtp_work(const Dims& d, const Dims& block, Recompute recompute, RecomputeModules modules) {
  LayerWork lw = block_work(block, recompute, modules);
  const LayerWork head = head_work(d);
  const LayerWork embedding = embedding_work(d, false);
  const double n = d.n();
  PhaseWork projection_f, projection_b, projection_w;
  elementwise(projection_f, 2 * norm_bytes(d));
  gemm(projection_f, n, 2 * d.h, d.h, d.t, TpSplit::N);
  gemm(projection_b, n, d.h, 2 * d.h, d.t, TpSplit::K);
  elementwise(projection_b, 2 * norm_backward_bytes(d));
  gemm(projection_w, 2 * d.h, n, d.h, d.t, TpSplit::N);
  for (const LayerWork* part : {&head, &embedding}) {
    add_work(lw.forward, part->forward);
    add_work(lw.backward_input, part->backward_input);
    add_work(lw.backward_weight, part->backward_weight);
    lw.activation_bytes += part->activation_bytes;
    lw.weight_grad_bytes += part->weight_grad_bytes;
    lw.working_bytes = std::max(lw.working_bytes, part->working_bytes);
  }
  add_work(lw.forward, projection_f);
  add_work(lw.backward_input, projection_b);
  add_work(lw.backward_weight, projection_w);
  if (recompute == Recompute::Full) add_work(lw.recompute, projection_f);
  lw.activation_bytes += d.replicated(kBf16 * n * 2 * d.h);  // the projection's input
  lw.weight_grad_bytes += d.replicated(kBf16 * n * 2 * d.h);
  lw.output_bytes = 2 * kBf16 * n * d.h / d.t;
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
    lw.recompute_modules = w.recompute_modules;
    return lw;
  }
  if (!model.transformer) throw_runtime("layer '{}' of model '{}' has no transformer shape", layer.name, model.name);
  if (w.recompute == Recompute::PerStage)
    throw_runtime("layer_work: per-stage recompute needs the level of the stage holding layer '{}'", layer.name);
  const TransformerConfig& c = *model.transformer;
  // The CPU's layers compute routed experts; the CUDA backend's compute none of these.
  const bool beyond_cpu = c.mla || c.attention_sinks || layer.kind == LayerKind::Mtp ||
                          (c.moe && c.moe->router_score_bias);
  if (w.memory != MemoryAccounting::GpuBf16 && (beyond_cpu || (c.moe && w.memory != MemoryAccounting::CpuFloat32)))
    throw_bad_input("--memory: the {} accounting counts what pipewright's own layers keep, which do not compute '{}''s "
                    "{}; use the gpu accounting",
                    to_string(w.memory), model.name,
                    w.memory == MemoryAccounting::CpuFloat32 ? "latent attention, sinks, MTP modules or router score bias"
                                                             : "experts, latent attention, sinks or MTP modules");
  if (w.memory != MemoryAccounting::GpuBf16 && w.recompute == Recompute::Selective && !w.recompute_modules.is_default())
    throw_bad_input("--recompute-modules: pipewright's own layers rerun the attention core only, so run and the {} "
                    "memory accounting take core_attn alone, not {}; give --recompute-modules core_attn",
                    to_string(w.memory), to_string(w.recompute_modules));
  const Dims d = dims_of(c, w, model.default_seq_len(), layer.block);
  LayerWork lw;
  switch (layer.kind) {
    case LayerKind::Embedding: lw = embedding_work(d, c.learned_positions); break;
    case LayerKind::Head: lw = head_work(d); break;
    case LayerKind::Mtp:
      lw = mtp_work(dims_of(c, w, model.default_seq_len(), -1), d, w.recompute, w.recompute_modules);
      if (w.precision == Precision::Fp8) run_gemms_in_fp8(lw, d);
      break;
    default:
      lw = block_work(d, w.recompute, w.recompute_modules);
      if (w.precision == Precision::Fp8) run_gemms_in_fp8(lw, d);
      break;
  }
  if (layer.kind == LayerKind::Block) lw.output_bytes = kBf16 * d.n() * d.h / d.t;
  if (w.memory != MemoryAccounting::GpuBf16) {
    const KeptLayout layout = w.memory == MemoryAccounting::CpuFloat32 ? kCpuKeptLayout
                              : cuda_kept_layout(w.memory == MemoryAccounting::CudaBf16 ? 2 : 4);
    const KeptBytes kept =
        kept_bytes(c, layer.kind, layer.block, w.micro_batch_size, static_cast<int>(d.s), w.recompute, layout, std::max(w.ep, 1));
    lw.activation_bytes = kept.after_forward;
    lw.weight_grad_bytes = kept.after_backward;
    lw.output_bytes = kept.output;
    lw.working_bytes = 0;
  }
  const LayerParameters params = layer_parameters(c, layer.kind, layer.block, static_cast<int>(d.t), w.ep, w.etp);
  lw.parameters = params.total();
  lw.routed_parameters = params.routed;
  lw.micro_batch_size = w.micro_batch_size;
  lw.recompute_modules = w.recompute_modules;
  lw.seq_len = static_cast<int>(d.s * d.cp);
  lw.cp = static_cast<int>(d.cp);
  lw.recompute_mode = w.recompute;
  return lw;
}

bool same_layer_shape(const Model& model, const Layer& a, const Layer& b) {
  if (!model.transformer || a.kind != LayerKind::Block || b.kind != LayerKind::Block) return false;
  const TransformerConfig& c = *model.transformer;
  return c.moe_block(a.block) == c.moe_block(b.block) && c.block_window(a.block) == c.block_window(b.block);
}

void append_layer_works(const Model& model, int first, int last, const Workload& w, LayerWorks& out) {
  out.reserve(out.size() + static_cast<size_t>(std::max(0, last - first + 1)));
  for (int i = first; i <= last; ++i) {
    const Layer& layer = model.layers[static_cast<size_t>(i)];
    if (i == first || !same_layer_shape(model, model.layers[static_cast<size_t>(i) - 1], layer))
      out.push_back(layer_work(model, layer, w));
    else
      out.repeat_last();
  }
}

double model_flops_per_microbatch(const Model& model, const Workload& w) {
  Workload whole = w;
  whole.tp = 1;  // all tp, cp and ep ranks together
  whole.cp = 1;
  whole.ep = 1;
  whole.etp = 1;
  whole.capacity_factor = 0;  // the tokens routed, not the padding
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
  whole.ep = 1;
  whole.etp = 1;
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

void add_work(PhaseWork& work, const PhaseWork& more) {
  work.gemm_flops += more.gemm_flops;
  work.fp8_gemm_flops += more.fp8_gemm_flops;
  work.attention_flops += more.attention_flops;
  work.memory_bytes += more.memory_bytes;
  work.kernels += more.kernels;
  work.collectives.insert(work.collectives.end(), more.collectives.begin(), more.collectives.end());
  work.cp_ring_steps = std::max(work.cp_ring_steps, more.cp_ring_steps);
  work.cp_ring_step_bytes += more.cp_ring_step_bytes;
  work.routed_gemm_flops += more.routed_gemm_flops;
  work.routed_padded = work.routed_padded || more.routed_padded;
  work.all_to_alls.insert(work.all_to_alls.end(), more.all_to_alls.begin(), more.all_to_alls.end());
  if (!more.all_to_alls.empty()) work.dispatch = more.dispatch;
  work.etp_collectives.insert(work.etp_collectives.end(), more.etp_collectives.begin(), more.etp_collectives.end());
  work.gemms.insert(work.gemms.end(), more.gemms.begin(), more.gemms.end());
  work.attentions.insert(work.attentions.end(), more.attentions.begin(), more.attentions.end());
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
