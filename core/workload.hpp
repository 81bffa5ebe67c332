#pragma once
// What one pipeline step processes and how it is parallelised.
#include <optional>
#include <string>

#include "core/memory_accounting.hpp"
#include "core/optimizer_precision.hpp"
#include "core/rank_order.hpp"
#include "core/recompute_modules.hpp"

namespace pw {

// PerStage: each stage (chunk) has its own level, Scenario::stage_recompute; the planner gives the stages
// that need it for memory the level that fits and leaves the others none.
enum class Recompute { None, Selective, Full, PerStage };

// The GEMMs' number format. Fp8 as Transformer Engine runs it: the transformer blocks' linear layers in
// fp8 (inputs cast, amax tracked), attention, norms, the embedding and the LM head in bf16.
enum class Precision { Bf16, Fp8 };
const char* to_string(Precision p);
Precision precision_from_string(const std::string& text);  // "bf16", "fp8"; BadInput naming --precision otherwise

const char* to_string(Recompute r);
Recompute recompute_from_string(const char* text);  // "none", "selective", "full", "per-stage"; BadInput otherwise

struct Workload {
  int micro_batch_size = 1;  // b
  int seq_len = 0;           // s
  int tp = 1;                // t
  // Context-parallel ranks sharing each sequence (mirrors ParallelConfig::cp): each holds s / cp tokens,
  // and its queries attend to the whole sequence's keys, passed round the cp ring.
  int cp = 1;
  // Expert parallelism (mirrors ParallelConfig::ep, etp): the routed experts spread over ep GPUs, each
  // expert's matrices split over etp.
  int ep = 1;
  int etp = 1;
  // Tokens each expert takes at most, as a multiple of the average (Megatron's --moe-expert-capacity-factor
  // with --moe-pad-expert-input-to-capacity: every expert padded to it); 0: dropless, as many as routed.
  double capacity_factor = 0;
  // Megatron-Core's token dispatcher for routed experts: alltoall (each copy to its expert's GPU) or flex
  // (DeepEP / HybridEP: one copy per token and remote node, forwarded inside it).
  enum class Dispatcher { AllToAll, Flex } dispatcher = Dispatcher::AllToAll;
  bool sequence_parallel = true;  // only meaningful when tp > 1
  Recompute recompute = Recompute::None;
  // What selective recomputation reruns (here and on the stages whose level is selective): Megatron's
  // recompute_modules, by default the attention core alone.
  RecomputeModules recompute_modules;
  Precision precision = Precision::Bf16;
  // Fused attention (FlashAttention; Megatron-Core's default attention backend through Transformer
  // Engine, torchtitan's SDPA): the s x s scores never reach memory; its backward recomputes them. On by
  // default as runs are made today; off reproduces Korthikanti et al.'s 2021-style accounting.
  bool flash_attention = true;
  // Megatron-Core's --activation-func-fp8-input-store: a gated MLP's activation input (fc1's gate and up, of
  // the dense MLP, the routed experts and the shared experts) kept for the backward in fp8, 1 byte an element
  // (the DeepSeek-V3 report stores its MoE SwiGLU inputs so, section 3.3.2).
  bool activation_fp8_input_store = false;
  // Whose activations the memory counts: the GPU framework's bf16 ones, or what the CPU backend keeps.
  MemoryAccounting memory = MemoryAccounting::GpuBf16;
};

const char* to_string(Workload::Dispatcher d);                        // "alltoall", "flex"
Workload::Dispatcher dispatcher_from_string(const std::string& text);  // BadInput naming --dispatcher otherwise

struct ParallelConfig {
  int tp = 1;
  // Context parallelism (Megatron's --context-parallel-size): each sequence split over cp GPUs, which
  // reduce gradients and shard the ZeRO state together with the dp replicas (Megatron's dp-cp group).
  int cp = 1;
  int pp = 1;
  int dp = 1;
  // Expert parallelism, placed as Megatron-Core's parallel folding places it: a stage's tp x cp x dp GPUs,
  // numbered tp fastest, then cp, then dp, are regrouped for the MoE layers as etp fastest, then ep, then
  // the expert-data-parallel rank: an ep group is ep GPUs etp apart. etp x ep must divide tp x cp x dp.
  int ep = 1;
  int etp = 1;
  // The GPUs a routed expert's gradients are reduced over (and its ZeRO state sharded over).
  int expert_dp() const { return tp * cp * dp / (ep * etp); }
  int vpp = 1;           // model chunks per pipeline rank
  int microbatches = 1;  // m per pipeline per iteration
  // ZeRO sharding over dp (Rajbhandari et al. 2020): 0 plain DDP, 1 optimizer state (Megatron's
  // distributed optimizer, the default), 2 and gradients, 3 and parameters (FSDP: each layer's parameters
  // all-gathered before its forward and, when resharded after it, again before its backward).
  int zero = 1;
  // Whether ZeRO-3 frees a layer's gathered parameters after its forward (torchtitan's
  // fsdp_reshard_after_forward); Default: as torchtitan's "default", on without pp and off with it.
  enum class Reshard { Default, Always, Never } reshard_after_forward = Reshard::Default;
  bool distributed_optimizer() const { return zero >= 1; }
  // Hybrid sharding (torchtitan's data_parallel_shard_degree x data_parallel_replicate_degree, Megatron's
  // --num-distributed-optimizer-instances dp / dp_shard): the ZeRO state is sharded over groups of dp_shard
  // consecutive dp ranks (with their cp ranks) and replicated across the dp / dp_shard groups. 0: all of dp.
  int dp_shard = 0;
  // The GPUs a stage's gradients are reduced over (Megatron's dp-cp group).
  int dp_cp() const { return dp * cp; }
  // The GPUs a stage's ZeRO state is sharded over, and how many copies of it the dp ranks keep.
  int shard_group() const { return (dp_shard > 0 ? dp_shard : dp) * cp; }
  int dp_replicas() const { return dp_shard > 0 ? dp / dp_shard : 1; }
  bool resharded() const { return reshard_after_forward == Reshard::Always || (reshard_after_forward == Reshard::Default && pp == 1); }
  // When ZeRO-3 (FSDP) reduce-scatters a stage's gradients. Default: every micro-batch's without pp, as FSDP
  // runs when nothing turns its gradient sync off; with pp once, after the last micro-batch, as PyTorch's
  // pipelining runs it (backward_maybe_with_nosync: the gradients accumulate unsharded until then).
  // EveryMicrobatch: each backward's gradients reduce-scattered into fp32 shards as they are made (one reading
  // of the Llama 3 paper's FSDP under pp), so no whole gradient is kept, at a reduction per micro-batch. LastMicrobatch: FSDP's no-sync gradient accumulation without pp as well.
  enum class GradSync { Default, EveryMicrobatch, LastMicrobatch } fsdp_grad_sync = GradSync::Default;
  // Whether every micro-batch's gradients are reduce-scattered into the shards: ZeRO-2's always, ZeRO-3's as
  // fsdp_grad_sync says.
  bool gradients_sharded_each_microbatch() const {
    if (zero == 2) return true;
    if (zero != 3) return false;
    return fsdp_grad_sync == GradSync::EveryMicrobatch || (fsdp_grad_sync == GradSync::Default && pp == 1);
  }
  // Megatron-Core's --overlap-grad-reduce: each bucket's reduction starts as its last gradient is made in
  // the last micro-batch's backward (PyTorch DDP and FSDP do the same); false: all of it after.
  bool overlap_grad_reduce = true;
  // Megatron-Core's --overlap-param-gather (megatron/training/arguments.py asserts it with the distributed
  // optimizer and --overlap-grad-reduce, and takes effect only with both): the updated weights'
  // all-gather runs behind the next step's first forward, each bucket waited for as its layers need it;
  // FSDP prefetches the same way. False: all of it after the reduction.
  bool overlap_param_gather = true;
  // Parameters a bucket holds (--ddp-bucket-size); 0: Megatron's default, max(40M, 1M x dp)
  // (megatron/core/distributed/distributed_data_parallel.py).
  double bucket_parameters = 0;
  // Megatron-LM's --grad-reduce-in-bf16 (Megatron-Bridge's grad_reduce_in_fp32 false, which its MoE
  // benchmark recipes set): the gradient buffer, its accumulation over micro-batches and its reduction in
  // bf16, 2 bytes a parameter, where the default keeps and reduces them in fp32.
  bool grad_reduce_in_bf16 = false;
  // Bytes of one parameter's gradient as accumulated and reduced.
  double grad_bytes() const { return grad_reduce_in_bf16 ? 2.0 : 4.0; }
  // Megatron-Core's precision-aware optimizer and its moments' widths (core/optimizer_precision.hpp); it
  // needs the distributed optimizer (ZeRO 1 or more).
  OptimizerPrecision optimizer_precision;
  RankOrder order = RankOrder::TpPpDp;  // where each (tp, pp, dp) rank sits in the cluster
  // tp x cp x pp x dp; BadInput naming the options when it leaves an int (resolve() and the plan file
  // refuse such configurations first, with their own names).
  int gpus() const;
};

// "default", "always", "never": torchtitan's fsdp_reshard_after_forward values. nullopt for other text (the
// caller names its option or field).
const char* to_string(ParallelConfig::Reshard r);
std::optional<ParallelConfig::Reshard> reshard_from_string(const std::string& text);
// "default", "every-microbatch", "last-microbatch"; nullopt for other text (the caller names its option or field).
const char* to_string(ParallelConfig::GradSync g);
std::optional<ParallelConfig::GradSync> grad_sync_from_string(const std::string& text);

// The global GPU index of a rank under an order. cp sits next to tp (Megatron's tp-cp-...): `tp_idx` is
// the index inside the tp x cp block, cp_idx x tp + the tp index.
int global_rank(const ParallelConfig& pc, RankOrder order, int tp_idx, int pp_idx, int dp_idx);
// Under the configuration's own order: how far apart two dp peers of one stage are.
int dp_stride(const ParallelConfig& pc);

}  // namespace pw
