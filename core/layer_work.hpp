#pragma once
// The work and memory of one layer for one micro-batch on one tensor-parallel rank,
// from the formulas in shared design notes (Narayanan 2021, Korthikanti 2022).
#include <optional>
#include <string>
#include <vector>

#include "core/model.hpp"
#include "core/workload.hpp"

namespace pw {

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter };
const char* collective_name(CollectiveKind kind);  // "all_reduce", "all_gather", "reduce_scatter"
// The kind a name gives, or false for a name collective_name() does not write.
bool collective_from_name(const std::string& name, CollectiveKind& kind);

// A tensor-parallel collective inside a layer: `bytes` is the size of the whole array (per rank
// after the all-gather / before the reduce-scatter), as nccl-tests count it.
struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  double bytes = 0;
};

// Which of DeepEP's kernels carry the all-to-all, where they do: the normal (high-throughput) ones of training's
// flex dispatcher and a serving prefill, the low-latency ones of SGLang's decode steps (`--deepep-mode auto`).
enum class DeepEpKernels { None, Normal, LowLatency };

// How a phase's all-to-alls carry the token copies: each to its expert's GPU (Megatron's alltoall
// dispatcher), or, with node_dedup, one copy per token to each other node hosting any of its top_k of the
// `experts` experts, spread to those experts over the node's links (DeepEP and HybridEP, Megatron's flex
// dispatcher); with group-limited routing, those of its top_groups groups.
struct RoutedDispatch {
  int experts = 0;
  int top_k = 0;
  bool node_dedup = false;
  int groups = 0;      // group-limited routing (MoeConfig::groups); 0: none
  int top_groups = 0;
  // The tokens this rank sends (before their top_k copies) and their width: what a measured all-to-all is
  // looked up by (kernels/); 0: not known, the bytes alone.
  double tokens = 0;
  int hidden = 0;
  DeepEpKernels deepep = DeepEpKernels::None;
};

// One phase (F, B or W) of one layer: compute-bound GEMM FLOPs, attention-core FLOPs (QK^T, AV and
// their gradients), memory-bound bytes (norms, activations functions, softmax, residuals, optimizer-free
// elementwise work) and the number of kernel launches.
// One dense GEMM of a phase as one GPU runs it (tp's share taken): M x K by K x N. A table-priced cost model
// looks its time up by shape (kernels/); the analytic one reads only the FLOPs.
struct GemmShape {
  double m = 0, k = 0, n = 0;
  bool fp8 = false;
  double flops() const { return 2 * m * k * n; }
};

// One fused attention kernel of a phase as one GPU runs it: `batch` sequences of `seq` queries over `keys`
// keys each (fewer under a sliding window), `heads` query heads and `kv_heads` key-value heads (tp's share
// taken) of `head_dim`; `flops` as attention_flops counts it. MLA's (keys and values of other widths) and
// context parallelism's (its ring of cp chunks) are marked, as is the backward (FlashAttention's dQ, dK, dV).
struct FusedAttention {
  int batch = 0, seq = 0, keys = 0, heads = 0, kv_heads = 0, head_dim = 0, cp = 1;
  bool mla = false, backward = false;
  double flops = 0;
};

struct PhaseWork {
  double gemm_flops = 0;
  double fp8_gemm_flops = 0;  // GEMMs run in fp8 (at the GPU's fp8 peak)
  double attention_flops = 0;
  double memory_bytes = 0;
  int kernels = 0;
  std::vector<Collective> collectives;  // tp collectives on the critical path of this phase
  // Context parallelism's K/V ring: steps, each passing this many bytes to the next cp rank while the
  // attention of one chunk runs (CostModel::cp_ring_time charges what the attention does not hide).
  int cp_ring_steps = 0;
  double cp_ring_step_bytes = 0;
  // Of gemm_flops (or fp8_gemm_flops), the routed experts' grouped GEMMs: the busiest rank of the expert-
  // parallel group runs more of them than the average by the cost model's load imbalance, unless
  // `routed_padded` (a capacity factor pads every expert to the same tokens, counted in the FLOPs).
  double routed_gemm_flops = 0;
  bool routed_padded = false;
  // Expert parallelism's all-to-alls in this phase (token dispatch and combine, or their gradients): for
  // each, the bytes this rank sends to the ep group, itself included, at the average load (k copies of
  // each token), and how they are routed (Workload::dispatcher).
  std::vector<double> all_to_alls;
  RoutedDispatch dispatch;
  // Expert tensor parallelism's collectives over the etp group (its tokens gathered, its outputs reduced).
  std::vector<Collective> etp_collectives;
  // The dense GEMMs of gemm_flops and fp8_gemm_flops, shape by shape (the routed experts' grouped GEMMs are
  // counted in routed_gemm_flops alone).
  std::vector<GemmShape> gemms;
  // The fused attention kernels of attention_flops (none for unfused attention: its products are in
  // attention_flops alone).
  std::vector<FusedAttention> attentions;

  double flops() const { return gemm_flops + fp8_gemm_flops + attention_flops; }
};

struct LayerWork {
  PhaseWork forward;
  PhaseWork backward_input;
  PhaseWork backward_weight;
  // Extra forward work run before B because of recomputation (full: the whole forward; selective: the
  // attention core and the other modules named). Charged to B.
  PhaseWork recompute;

  double parameters = 0;           // parameters held by this GPU (tp, and for routed experts ep x etp)
  // Of `parameters`, the routed experts': sharded and reduced over the expert-data-parallel group.
  double routed_parameters = 0;
  bool fp8 = false;                // its GEMMs run in fp8 (a block under Precision::Fp8)
  double activation_bytes = 0;     // stored at F for this micro-batch
  // Held from B until W (freed at W). Under GpuBf16 the part of activation_bytes W still needs; under
  // CpuFloat32 more than activation_bytes, as B adds the output gradients it keeps for W.
  double weight_grad_bytes = 0;
  double output_bytes = 0;         // the tensor sent to the next layer (per tp rank)
  // Transient bytes while F or B of this layer runs, on top of what is held: scores computed and dropped
  // (selective recompute without fused attention), the rebuilt layer (full recompute), the s x s
  // gradients of unfused attention, the MLP's inner gradient, the head's bf16 logits and their gradient.
  // The larger of F's and B's; 0 under the backends' accountings, which measure kept tensors only.
  double working_bytes = 0;

  // Explicit layers carry their times; when set they replace the roofline.
  std::optional<double> forward_s, backward_input_s, backward_weight_s;

  // The micro-batch this work is for, as layer_work() resolved it (seq_len: the workload's, or the model's
  // default), and the recomputation it includes: a measured cost model looks its entry up by these.
  int micro_batch_size = 1;
  int seq_len = 0;  // the whole sequence, of which each of the cp ranks holds seq_len / cp tokens
  int cp = 1;
  Recompute recompute_mode = Recompute::None;
  RecomputeModules recompute_modules;  // what selective recomputation reruns
};

// Adds every figure of `more` to `work` (a layer made of parts: an MTP module's projection, block and head).
void add_work(PhaseWork& work, const PhaseWork& more);

LayerWork layer_work(const Model& model, const Layer& layer, const Workload& w);

// Whether two layers of a transformer have the same work under every workload: two blocks, both with routed
// experts or both without, with the same attention window (all layer_work and the cost models read of a block's
// position). A model's blocks come in long runs of one shape.
bool same_layer_shape(const Model& model, const Layer& a, const Layer& b);

// FLOPs of one micro-batch through the whole model, all tp and cp ranks together (Narayanan's accounting:
// backward = 2 x forward; model FLOPs exclude recomputation, hardware FLOPs include it).
double model_flops_per_microbatch(const Model& model, const Workload& w);
double hardware_flops_per_microbatch(const Model& model, const Workload& w);

// Throws BadInput when `tp` cannot shard the model as Megatron does: attention heads and KV heads
// must be multiples of tp (explicit models accept any tp: their costs are used as given).
void check_tensor_parallel(const Model& model, int tp);

}  // namespace pw
