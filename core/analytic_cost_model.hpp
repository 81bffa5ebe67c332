#pragma once
// The analytic (roofline) cost model: compute at a fraction of the GPU's peak, memory-bound work at a
// fraction of HBM bandwidth, a fixed cost per kernel launch, and ring collectives on the links.
// Every default is explained in docs/cost-model.md and checked against published training runs
// (tests/validation/published_runs_test.cpp).
#include <string>

#include "core/cost_model.hpp"

namespace pw {

struct AnalyticCostParams {
  // Fraction of the GPU's dense bf16 peak reached by the layer's GEMMs (QKV, projections, MLP, logits).
  double gemm_efficiency = 0.70;
  // Fraction of the GPU's dense fp8 peak that fp8 GEMMs reach; the bf16 fraction until measured.
  double fp8_gemm_efficiency = 0.70;
  // Fraction of peak reached by the attention core (flash attention: QK^T, softmax, AV and gradients).
  double attention_efficiency = 0.45;
  // Fraction of HBM bandwidth reached by memory-bound kernels (norms, activations, dropout, residuals).
  double memory_efficiency = 0.70;
  // Seconds of launch and tail cost per kernel, beyond its FLOPs and bytes, in training and serving alike.
  // AIConfigurator's measured bf16 GEMMs of 1 to 4 rows, fitted as a fixed time plus their weights' read,
  // agree: a median of 3.8 us over 13 tables, 3.2 to 4.5 us on H100, H200 and B200 (docs/cost-model.md).
  double kernel_overhead_s = 4e-6;
  // Fraction of a link's nominal bandwidth that a ring collective's bus bandwidth reaches (NCCL busbw).
  double collective_efficiency = 0.75;
  // Fraction of a link's nominal bandwidth reached by one point-to-point transfer.
  double p2p_efficiency = 0.80;
  // Fraction of the tensor-parallel collectives hidden behind compute (0: all on the critical path).
  double tp_overlap = 0.0;
  // Bytes of HBM traffic per parameter for one Adam step (fp32 master, gradient, two moments read;
  // master and moments written; bf16 copy written).
  double optimizer_bytes_per_parameter = 30.0;
  // Bytes of model state per parameter: bf16 weights, fp32 gradients, and optimizer state
  // (fp32 master weights + two fp32 Adam moments), the last sharded over dp by the distributed optimizer.
  double weight_bytes_per_parameter = 2.0;
  double grad_bytes_per_parameter = 4.0;
  double optimizer_state_bytes_per_parameter = 12.0;
  // Bytes each GPU loses before any tensor: CUDA context, NCCL buffers, cuBLAS workspaces and
  // allocator fragmentation.
  double memory_reserve_bytes = 3e9;
  // Fraction of the shorter of F and B + W hidden when a forward and a backward of two micro-batches run
  // overlapped (DualPipe's F&B composite: one's communication and bubbles hide behind the other's compute).
  // 0 until measured: the composite then costs F + B + W.
  double fb_overlap = 0.0;
  // The busiest expert-parallel rank's routed tokens over the average: its expert GEMMs and all-to-alls take
  // this much longer, and every rank waits for it. 1: balanced, as the published MoE benchmarks force it
  // (Megatron-Bridge's performance recipes set moe_router_force_load_balancing); a measured router's
  // imbalance otherwise. A capacity factor that pads every expert (--capacity-factor) replaces it.
  double moe_load_imbalance = 1.0;
  // The share of the GPU's SMs an expert all-to-all's kernels hold, taken from the compute an F&B composite
  // runs beside them: Megatron-Core's DeepEP dispatcher runs on moe_deepep_num_sms = 20 SMs by default
  // (megatron/core/transformer/transformer_config.py), of an H100's 132.
  double all_to_all_sm_share = 20.0 / 132.0;
  // Host (CPU) seconds one MoE block takes to issue a micro-batch's forward, backward and weight gradients as
  // Megatron-Core runs it from PyTorch without CUDA graphs (eager, as the 26.04 H100 benchmarks ran it), fitted
  // to a published run. Its dispatcher copies the tokens-per-expert counts to the host every micro-batch, so
  // the host never runs more than one MoE layer ahead of the GPU: each phase of the block takes at least its
  // share of this (docs/cost-model.md). 0: the GPU never waits on the host.
  double moe_host_s = 9e-3;
};

// The defaults for predicting pipewright's own executor (`run`, and `calibrate` fitting its runs): its MoE
// blocks are issued from C++ with no per-layer wait for a framework's host, so moe_host_s is 0.
AnalyticCostParams executor_cost_params();

// Sets one parameter by its field name ("gemm_efficiency", ...): the form `--cost-param NAME=VALUE` takes.
// Throws BadInput naming the known fields for an unknown one.
void set_param(AnalyticCostParams& params, const std::string& name, double value);
// "name=value" -> set_param; BadInput when the text is not of that form.
void set_param(AnalyticCostParams& params, const std::string& assignment);

class AnalyticCostModel : public CostModel {
 public:
  explicit AnalyticCostModel(AnalyticCostParams params = {});

  std::string name() const override { return "analytic"; }
  double phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                    const LinkSpec& tp_link, int tp) const override;
  double cp_ring_time(const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& cp_link) const override;
  double expert_comm_time(const LayerWork& work, Phase phase, const AllToAllLinks& links) const override;
  // One all-to-all of `bytes` per rank (itself included: k copies of its tokens) over the ep group, at the
  // average load, its copies routed as `dispatch` says.
  double all_to_all_time(double bytes, const AllToAllLinks& links, const RoutedDispatch& dispatch = {}) const;
  // A roofline per part: the GEMMs at the longer of their FLOPs and their weights' reading, the attention at
  // the longer of its FLOPs and its KV traffic, the elementwise bytes, and the tp all-reduces whole (serving
  // overlaps none); no launch cost (vLLM replays decode iterations as CUDA graphs).
  double serving_time(const Layer& layer, const ServingWork& work, const GpuSpec& gpu, const LinkSpec& tp_link,
                      int tp) const override;
  // Each part is a rate over its work, the longer of two where two bound it, and the all-reduce's ring at any
  // size takes no less than the custom one below it: nothing falls as the work grows.
  bool serving_time_monotone() const override { return true; }
  // serving_time reads the work alone: priced once (a 1,000-GPU serve plan priced each block of every step).
  double add_serving_times(double seconds, const Layer& layer, const ServingWork& work, const GpuSpec& gpu,
                           const LinkSpec& tp_link, int tp, int count) const override {
    const double each = serving_time(layer, work, gpu, tp_link, tp);
    for (int i = 0; i < count; ++i) seconds += each;
    return seconds;
  }
  // A serving iteration's tp collective: an all-reduce inside a node up to kCustomAllReduceMaxBytes runs as
  // vLLM's custom all-reduce (vllm/distributed/device_communicators/custom_all_reduce.py, used on fully
  // connected GPUs up to its max_size of 8 MiB): two steps of one latency each; anything else as collective_time.
  double serving_collective_time(const Collective& c, int tp, const LinkSpec& link) const;
  static constexpr double kCustomAllReduceMaxBytes = 8.0 * 1024 * 1024;
  double collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const override;
  LinkSpec p2p_link(const LinkSpec& nominal) const override;
  double optimizer_step_time(double parameters, const GpuSpec& gpu, const StateWidths& widths) const override;
  double model_state_bytes_per_parameter(int dp, int zero, const StateWidths& widths) const override;
  double memory_reserve_bytes() const override { return params_.memory_reserve_bytes; }
  double overlapped_fb_time(double forward_s, double backward_s) const override;
  double all_to_all_sm_share() const override { return params_.all_to_all_sm_share; }
  // moe_host_s for a block with routed experts, shared among its phases by their kernel launches (the
  // recomputation's with B's); 0 for every other layer and for a layer with measured costs.
  double host_time(const Layer& layer, const LayerWork& work, Phase phase, int tp) const override;
  double full_backward_saving(const Layer& layer, const LayerWork& work, int tp) const override;

  // Seconds for one phase's work without its collectives (compute, memory traffic and launches).
  double compute_time(const PhaseWork& work, const GpuSpec& gpu) const;

  const AnalyticCostParams& params() const { return params_; }

 private:
  double phase_work_time(const PhaseWork& work, const GpuSpec& gpu, const LinkSpec& tp_link, int tp) const;
  double ring_wait(const PhaseWork& work, const GpuSpec& gpu, const LinkSpec& cp_link) const;
  double phase_expert_comm(const PhaseWork& work, const AllToAllLinks& links) const;

  AnalyticCostParams params_;
};

// Checks every parameter (efficiencies in (0, 1], overheads and byte counts >= 0); throws BadInput
// naming the field.
void validate(const AnalyticCostParams& params);

}  // namespace pw
