#pragma once
// Turns a model, a layer split and a parallel configuration into per-stage costs: the numbers the
// simulator needs for every (stage, micro-batch) action.
#include <optional>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/layer_works.hpp"
#include "core/model.hpp"
#include "core/workload.hpp"

namespace pw {

// The most gradient buckets one stage may reduce in (--ddp-bucket-size): each is a collective of its own in the
// simulation, and a bucket of a few parameters made billions of them (Megatron's default makes tens).
inline constexpr double kMaxGradBuckets = 100'000;
// BadInput naming --ddp-bucket-size when `parameters` (of stage `stage`, or of the whole model without one) in
// buckets of `bucket` parameters make more than kMaxGradBuckets.
void check_grad_buckets(double parameters, double bucket, std::optional<int> stage = std::nullopt);

// Layers [first, last] (indices into Model::layers, inclusive) held by one stage (model chunk).
struct LayerRange {
  int first = 0;
  int last = -1;
  int count() const { return last - first + 1; }
};

struct StageCost {
  LayerRange layers;
  double forward_s = 0;
  double backward_input_s = 0;   // recomputation included
  double backward_weight_s = 0;
  // An F&B composite whose forward half is this stage (DualPipe's overlapped pair: this stage's forward
  // of one micro-batch with the full backward of the rank's other chunk for another), measured as one
  // kernel; 0: the halves' sum, F + B + W, as if they ran one after the other.
  double overlapped_fb_s = 0;
  // What this stage's full backward (a BW action, or the backward half of an F&B composite) saves over its B
  // and W run apart: the sum of its layers' CostModel::full_backward_saving.
  double full_backward_saving_s = 0;
  // Of forward_s and backward_input_s, the expert-parallel all-to-alls (and etp collectives): what an F&B
  // composite of two micro-batches hides behind the other's compute (core/overlapped_pair.hpp; DualPipe's
  // overlap, Megatron's --overlap-moe-expert-parallel-comm).
  double expert_comm_forward_s = 0;
  double expert_comm_backward_s = 0;
  // Of forward_s and of backward_input_s + backward_weight_s, the host's time to issue them where it cannot run
  // ahead of the GPU (CostModel::host_time): an F&B composite takes at least their sum, one host thread
  // issuing both halves.
  double host_forward_s = 0;
  double host_backward_s = 0;
  // Of forward_s + backward_input_s + backward_weight_s, what the GPU spends waiting for the host: the phases
  // whose host time exceeds their GPU time, by that much.
  double host_wait_s = 0;
  double activation_bytes = 0;   // allocated at F, per micro-batch
  // Held from B until W and freed there; B frees activation_bytes - weight_grad_bytes, or allocates the
  // difference when it keeps more for W than F kept for it (the CPU backend's output gradients).
  double weight_grad_bytes = 0;
  double output_bytes = 0;       // activation sent to the next stage (and its gradient sent back)
  double working_bytes = 0;      // the largest LayerWork::working_bytes of its layers: one layer runs at a time
  double parameters = 0;         // on one GPU of this stage
  double routed_parameters = 0;  // of them, routed experts' (sharded and reduced over the expert-dp group)
  double model_state_bytes = 0;  // weights, gradients, optimizer state on one GPU
  double grad_reduce_s = 0;      // data-parallel reduction of this stage's gradients, all of it
  // The reduction in buckets (Megatron's DDP buckets, launched as each fills during the last backward):
  // grad_buckets of grad_bucket_s each, then grad_gather_s (the distributed optimizer's parameter
  // all-gather) after the last; grad_reduce_s is their sum. One bucket: not overlapped.
  int grad_buckets = 1;
  // ZeRO-2 and -3 keep only their shard of the gradients: every micro-batch's are reduce-scattered, not
  // only the last's.
  bool reduce_every_microbatch = false;
  double grad_bucket_s = 0;
  double grad_gather_s = 0;
  double grad_reduce_bytes = 0;  // the gradients that reduction reduces, fp32 or bf16 (0 without data parallelism)
  double optimizer_s = 0;        // optimizer step over this stage's parameters
  // Of model_state_bytes, the GPU's fixed reserve (CostModel::memory_reserve_bytes: CUDA context,
  // communication buffers, workspaces, fragmentation). Only the first chunk a rank holds (stage s < pp)
  // carries it, so that summing model_state_bytes over a rank's stages counts it once.
  double reserved_bytes = 0;

  // A full backward's seconds: B and W as one action.
  double full_backward_s() const { return backward_input_s + backward_weight_s - full_backward_saving_s; }
};

// The widths a configuration keeps its model state at (bf16 gradients, the precision-aware optimizer).
StateWidths state_widths(const ParallelConfig& pc);

// Model state per parameter on one GPU as a configuration keeps it: the cost model's, by ZeRO level, plus
// the bf16 copy ZeRO-3 keeps gathered for the whole step when it does not reshard after forward.
// With `fp8`, Transformer Engine's fp8 copy of the weights and its transpose (2 bytes), counted on every
// parameter (the embedding and head, kept in bf16, are a few percent of a stage's).
double state_bytes_per_parameter(const CostModel& cost, const ParallelConfig& pc, bool fp8 = false);

// The sharding of the routed experts' state: over the expert-data-parallel group (tp x cp x dp / (ep x etp)
// GPUs), no cp or dp_shard of its own.
ParallelConfig expert_sharding(const ParallelConfig& pc);

// What ZeRO-3 adds to a layer's working set: when it reshards after forward, the gathered bf16 weights of
// the layer and of the next one (prefetched) and the layer's unsharded fp32 gradient before its
// reduce-scatter; with the weights kept gathered and every micro-batch's gradients reduce-scattered, that
// gradient alone. 0 otherwise.
double zero3_layer_working_bytes(const ParallelConfig& pc, double layer_parameters);

// Splits the model's layers into `stages` contiguous ranges. `blocks_per_stage` gives the number of
// transformer blocks per stage; the embedding joins the first stage and the head the last. Throws
// BadInput when the split does not sum to the block count, has a number per stage missing or extra, or
// leaves a stage empty, and when there are more stages than layers.
// Without `blocks_per_stage` the ranges minimise the largest stage cost (exactly, over `layer_cost`, each
// layer's F + B + W seconds: see layer_step_costs), then the sum of squared stage costs; ties give later
// stages more layers (core/balanced_split.hpp). Without `layer_cost` a block costs 1, embedding and head 0.
std::vector<LayerRange> split_layers(const Model& model, int stages, const std::vector<int>& blocks_per_stage,
                                     const std::vector<double>& layer_cost = {});

// Per-stage costs. `stage_gpu[s]` is the global rank of the first GPU (tp rank 0) of stage s's pipeline
// rank in data-parallel replica 0: it selects the GPU type and the tp/dp links. With `copies` of the model
// (Schedule::copies: `ranges` lists each copy's stages in turn, stage s and s + stages / copies holding the
// same layers), a part's copies reduce its gradients and shard its ZeRO state together, as copies x dp
// data-parallel members.
std::vector<StageCost> stage_costs(const Model& model, const std::vector<LayerRange>& ranges, const Workload& w,
                                   const ParallelConfig& pc, const Cluster& cluster, const CostModel& cost,
                                   const std::vector<int>& stage_gpu, int copies = 1);

// The same from each layer's work already computed (`work[i]` for Model::layers[i]).
std::vector<StageCost> stage_costs(const Model& model, const LayerWorks& work,
                                   const std::vector<LayerRange>& ranges, const ParallelConfig& pc,
                                   const Cluster& cluster, const CostModel& cost, const std::vector<int>& stage_gpu,
                                   int copies = 1);

// Each layer's work, at the recompute level of the stage that holds it when `stage_recompute` gives one
// per stage (per-stage recompute), else at w.recompute.
LayerWorks staged_layer_work(const Model& model, const Workload& w, const std::vector<LayerRange>& ranges,
                                         const std::vector<Recompute>& stage_recompute);

// Each layer's F + B + W seconds for one micro-batch on the tp group whose first GPU is `first_gpu`, less what
// one backward pass saves (CostModel::full_backward_saving): the `layer_cost` that split_layers balances.
std::vector<double> layer_step_costs(const Model& model, const Workload& w, const ParallelConfig& pc,
                                     const Cluster& cluster, const CostModel& cost, int first_gpu = 0);

// The links the phases of a layer use on one stage's GPUs: its tp group's (tp consecutive GPUs) and its
// cp ring's (cp GPUs, tp apart), from the stage's first GPU.
struct GroupLinks {
  LinkSpec tp;
  LinkSpec cp;
  AllToAllLinks ep;  // the ep group's all-to-all (core/expert_parallel.hpp)
};
GroupLinks group_links(const Cluster& cluster, const ParallelConfig& pc, int first_gpu);

// One phase of one layer: the GPU's time (the cost model's, tp collectives included, plus what the layer waits
// on the cp ring and spends in the ep all-to-alls) and the host's to issue it (CostModel::host_time).
struct PhaseCost {
  double gpu_s = 0;
  double host_s = 0;
  double time() const { return gpu_s > host_s ? gpu_s : host_s; }  // the slower of the two sets the pace
  double host_wait() const { return host_s > gpu_s ? host_s - gpu_s : 0; }
};
PhaseCost layer_phase_cost(const CostModel& cost, const Layer& layer, const LayerWork& work, Phase phase,
                           const GpuSpec& gpu, const GroupLinks& links, int tp);
// layer_phase_cost(...).time(): the phase as stage_costs() charges it.
double layer_phase_time(const CostModel& cost, const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                        const GroupLinks& links, int tp);

// The slowest link of the ring through GPUs first, first + stride, ..., first + (n-1) stride (the
// lowest bandwidth and the highest latency among its n hops); the ideal cluster's free link
// (infinite bandwidth, no latency) when cluster.ideal, and also when n <= 1.
LinkSpec group_link(const Cluster& cluster, int first, int stride, int n);

}  // namespace pw
