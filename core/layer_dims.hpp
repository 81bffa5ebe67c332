#pragma once
// The shapes layer_work() computes with, shared by its parts (core/layer_work.cpp: attention, dense MLP,
// embedding and head; core/moe_work.cpp: routed and shared experts). Internal to those files.
#include <algorithm>
#include <vector>

#include "core/layer_work.hpp"

namespace pw::detail {

inline constexpr double kBf16 = 2;  // bytes per activation element
inline constexpr double kFp32 = 4;  // bytes per logit in the loss, per router score
inline constexpr double kMask = 1;  // bytes per dropout-mask element

// One of the attention's input projections: `in` to `out` features (all heads), split by tp (column
// parallel) or computed whole on each rank's tokens (MLA's down projections, `split` false).
struct Projection {
  double in = 0, out = 0;
  bool split = true;
};

// The routed experts of an MoE block as one GPU runs them.
struct RoutedShape {
  double experts = 0;  // E
  double local = 0;    // E / ep on this GPU
  double k = 0;        // top_k
  double f = 0;        // one expert's intermediate size (whole; etp splits it)
  double shared_f = 0;
  bool shared_gate = false;
  double ep = 1, etp = 1;
  double capacity = 0;  // Workload::capacity_factor
  bool node_dedup = false;  // the flex dispatcher
  int groups = 0, top_groups = 0;  // group-limited routing (MoeConfig)
  // Token-expert pairs this GPU's experts run per micro-batch: its own tokens x top_k (each ep rank sends as
  // many as it receives on average) x etp (each etp rank runs every token of its ep rank's group), times
  // the capacity factor when padded.
  double pairs = 0;
};

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
  double act_in;  // bytes an element of a gated MLP's stored activation input: 2, or 1 kept in fp8
  double keys;    // keys each query attends: s, or the sliding window when shorter
  // Attention widths over all heads: the queries' and keys' in QK^T (q), the values' and so the output
  // projection's input (o), K and V as stored for the backward, the rotary part of Q and K, MLA's latents
  // (computed whole on every tp rank), and the input projections.
  double o, k_stored, v_stored, rope, latent;
  std::vector<Projection> in_proj;
  bool moe = false;  // the block's MLP is routed experts
  RoutedShape routed;

  double n() const { return b * s; }  // tokens
  // Elements of one hidden-size activation in the part tp replicates (norms, dropout, residual
  // adds): the whole sequence without sp, a 1/t shard with it.
  double rep() const { return sp ? n() * h / t : n() * h; }
  // Bytes kept whole by tp without sp, divided by t with it (Korthikanti's "10 s b h" part).
  double replicated(double bytes) const { return sp ? bytes / t : bytes; }
  double attention_matrix() const { return a * s * keys * b / t; }  // elements of the a/t heads' s x keys scores
  double mlp_in() const { return swiglu ? 2 * f : f; }           // up-projection width (gate + up for SwiGLU)
  double tokens_per_rank() const { return sp ? n() / t : n(); }  // the tokens an MoE layer routes from this rank
};

// Which dimension of a GEMM tp splits: N for a column-parallel layer's output, K for a row-parallel one's
// input, M for the tokens (a weight gradient's rows of a row-parallel layer, sequence parallelism's share).
enum class TpSplit { M, K, N };

// An m x k by k x n product with one dimension split over t ranks.
inline void gemm(PhaseWork& p, double m, double k, double n, double t, TpSplit split) {
  p.gemm_flops += 2 * m * k * n / t;
  ++p.kernels;
  p.gemms.push_back({split == TpSplit::M ? m / t : m, split == TpSplit::K ? k / t : k, split == TpSplit::N ? n / t : n});
}
inline void elementwise(PhaseWork& p, double bytes) {
  p.memory_bytes += bytes;
  ++p.kernels;
}
inline void collective(PhaseWork& p, CollectiveKind kind, double bytes) { p.collectives.push_back({kind, bytes}); }

// The tp collectives around one of the two tp regions of a block (attention, MLP). Forward: the
// row-parallel output is all-reduced, or with sp the input all-gathered and the output
// reduce-scattered. Backward-input mirrors it (the all-gather's gradient is a reduce-scatter and
// vice versa; Megatron's re-gather of the input for the weight gradient overlaps the dgrad GEMM
// and is not charged).
inline void tp_region_collectives(PhaseWork& p, const Dims& d) {
  if (d.t <= 1) return;
  const double bytes = kBf16 * d.n() * d.h;
  if (d.sp) {
    collective(p, CollectiveKind::AllGather, bytes);
    collective(p, CollectiveKind::ReduceScatter, bytes);
  } else {
    collective(p, CollectiveKind::AllReduce, bytes);
  }
}

// Shared by the block's parts and the modules selective recomputation reruns (core/layer_work.cpp): the
// tp split of an attention input projection (column parallel, or whole on this rank's tokens, a 1/t share
// with sp); a norm's traffic (read x, write y); the dense MLP's forward.
double projection_split(const Projection& pr, const Dims& d);
double norm_bytes(const Dims& d);
void dense_mlp_forward(PhaseWork& p, const Dims& d);
// Megatron-Core's activation_func_fp8_input_store casts a SwiGLU's input of `elements` to fp8 after F's activation
// (read 2 bytes, write 1; `input.to(torch.float8_e4m3fn)` in fused_bias_swiglu.py) and back before B's: one
// pass of 3 bytes an element in each; nothing without it.
void cast_activation_input(PhaseWork& p, const Dims& d, double elements);
// Bytes a dense MLP keeps per element of its inner width: GeLU's input and output, or SwiGLU's gate and up (at
// d.act_in) and their product.
inline double dense_mlp_stored_bytes(const Dims& d) { return d.swiglu ? 2 * d.act_in + kBf16 : 2 * kBf16; }

// The MoE MLP of a block (core/moe_work.cpp): F, B and W, what it stores at F, what W needs, what it holds
// while it runs beyond that, and the GEMM inputs (F) and output gradients (B) fp8 casts.
void moe_forward(PhaseWork& p, const Dims& d);
void moe_backward_input(PhaseWork& p, const Dims& d);
void moe_backward_weight(PhaseWork& p, const Dims& d);
struct MoeMemory {
  double stored = 0;       // per rank
  double weight_grad = 0;  // per rank
  double working = 0;      // per rank
  double fp8_forward_inputs = 0;  // elements per rank
  double fp8_output_grads = 0;    // elements per rank
};
MoeMemory moe_memory(const Dims& d);
// Parts of it that selective recomputation reruns: the routed experts' activation function and the shared
// experts' MLP (F's work), and the bytes F stores for each.
void expert_activation(PhaseWork& p, const Dims& d);
double expert_activation_stored(const Dims& d);
void shared_experts_forward(PhaseWork& p, const Dims& d);
double shared_experts_stored(const Dims& d);

// Megatron's selective recomputation modules other than the attention core (core/module_recompute.cpp):
// what each drops at F comes off the block's stored activations, and its forward work runs before B.
void recompute_modules_work(LayerWork& lw, const Dims& d, RecomputeModules modules);

}  // namespace pw::detail
