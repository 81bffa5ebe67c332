#pragma once
// The cost model interface: how long each phase of each layer, each collective and each transfer
// takes. Implementations: analytic (roofline, core/analytic_cost_model.hpp); profiled and calibrated
// ones come with the profiler and calibration.
#include <memory>
#include <optional>
#include <string>

#include "core/cluster.hpp"
#include "core/expert_parallel.hpp"
#include "core/layer_work.hpp"

namespace pw {

enum class Phase { Forward, BackwardInput, BackwardWeight };

struct ServingWork;  // core/serving_work.hpp

// The widths a stage's model state is kept at, where they differ from the cost model's own counts.
struct StateWidths {
  bool bf16_grads = false;                // ParallelConfig::grad_reduce_in_bf16: 2 bytes a gradient
  std::optional<double> optimizer_bytes;  // OptimizerPrecision::state_bytes(): master weights and moments
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;

  // Seconds for one phase of one layer for one micro-batch on `gpu`, including the tp collectives
  // of that phase over `tp_link` among `tp` ranks, and (for BackwardInput) the recomputation.
  virtual double phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                            const LinkSpec& tp_link, int tp) const = 0;

  // Seconds one phase of a layer waits on context parallelism's K/V ring (PhaseWork::cp_ring_steps) beyond
  // the attention each step hides behind, the ring passing between cp neighbours over `cp_link`; for
  // BackwardInput the recomputation's ring too. 0 without context parallelism.
  virtual double cp_ring_time(const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& cp_link) const = 0;

  // Seconds one phase of a layer spends in expert parallelism's all-to-alls (PhaseWork::all_to_alls) over the
  // ep group `links` describes, and in expert tensor parallelism's collectives; for BackwardInput the
  // recomputation's too. 0 for layers without routed experts.
  virtual double expert_comm_time(const LayerWork& work, Phase phase, const AllToAllLinks& links) const = 0;

  // Seconds of one layer's work in one serving iteration (core/serving_work.hpp) on `gpu`, its tp collectives
  // over `tp_link` among `tp` ranks included. `layer` lets a measured model answer by the layer's kind.
  virtual double serving_time(const Layer& layer, const ServingWork& work, const GpuSpec& gpu, const LinkSpec& tp_link,
                              int tp) const = 0;

  // `seconds` plus serving_time of `count` consecutive layers alike in shape (same_layer_shape) doing the same
  // `work`, added one at a time (to the last bit the sum of a loop over them). Each is asked here, for models that
  // count what they price; a model whose answer depends on nothing else answers once.
  virtual double add_serving_times(double seconds, const Layer& layer, const ServingWork& work, const GpuSpec& gpu,
                                   const LinkSpec& tp_link, int tp, int count) const {
    for (int i = 0; i < count; ++i) seconds += serving_time(layer, work, gpu, tp_link, tp);
    return seconds;
  }

  // Whether serving_time never falls as a layer's work grows (more tokens, sequences, context, bytes): then a step
  // holding one request's decode alone takes no longer than any step holding it, and a search may drop a
  // configuration on that floor (planner/serving_leaders.hpp). False unless a model knows it of itself.
  virtual bool serving_time_monotone() const { return false; }

  // Seconds for a ring collective of an array of `bytes` over `ranks` ranks whose slowest link is `link`.
  virtual double collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const = 0;

  // The achievable point-to-point link (bandwidth and latency a transfer sees alone on it).
  virtual LinkSpec p2p_link(const LinkSpec& nominal) const = 0;

  // Seconds for the optimizer step over `parameters` parameters held by one GPU (after sharding), its state
  // kept at `widths`.
  virtual double optimizer_step_time(double parameters, const GpuSpec& gpu, const StateWidths& widths) const = 0;

  // Bytes of model state per parameter: weights, gradients, optimizer state, each sharded over dp from
  // its ZeRO level on (`zero`: 1 the optimizer state, 2 and gradients, 3 and weights), kept at `widths`.
  virtual double model_state_bytes_per_parameter(int dp, int zero, const StateWidths& widths) const = 0;

  // Bytes each GPU loses before any tensor (CUDA context, communication buffers, workspaces,
  // fragmentation). stage_costs() adds it once per GPU, to the first chunk each rank holds.
  virtual double memory_reserve_bytes() const { return 0; }

  // Seconds of one forward overlapped with one full backward (B + W) of another micro-batch, DualPipe's
  // F&B composite, given the two halves' own times. Its own cost: 0 means "no overlap measured", and the
  // simulator then charges forward_s + backward_s.
  virtual double overlapped_fb_time(double forward_s, double backward_s) const { return 0; }

  // Seconds a layer's full backward run as one pass (a BW action) saves over its B and W run apart, where
  // measured (an explicit model's backward_s, a profile's one-pass backward); 0 elsewhere. stage_costs() sums
  // it per stage (StageCost::full_backward_saving_s); the simulator charges a BW B + W less it.
  virtual double full_backward_saving(const Layer& layer, const LayerWork& work, int tp) const { return 0; }

  // Seconds of fixed cost per phase of a compute action, beyond its layers' times: an executor's dispatch
  // overhead (a calibrated model fits it to runs; 0 for the others). stage_costs() adds it once to each
  // stage's F, B and W, so an action that runs B and W together (BW) pays it twice.
  virtual double action_overhead_s() const { return 0; }
  // Whether a full backward (BW, a composite's backward half) is one call of the runtime and pays
  // action_overhead_s once, as PyTorch's pipelining runs it (stage_backward), rather than once for B and once
  // for W, as pipewright's executor does.
  virtual bool full_backward_one_action() const { return false; }

  // How much slower compute runs while a point-to-point transfer to or from its rank is in flight, as a
  // fraction: 0.1 makes it run 1.1 times as long for that time (communication kernels sharing the GPU's
  // SMs and memory bandwidth; a calibrated model fits it to traces of runs). The simulator charges it.
  virtual double transfer_compute_slowdown() const { return 0; }

  // Seconds a rank's own thread spends issuing each send and each receive before it goes on: a runtime that
  // posts asynchronous operations from the rank's thread (PyTorch's pipelining on gloo). The transfer starts
  // after it. 0: issued in no time, as a GPU's host runs ahead of the device.
  virtual double transfer_post_s() const { return 0; }

  // The share of the GPU's SMs an expert all-to-all's kernels hold while they run: when an F&B composite runs
  // one micro-batch's all-to-alls beside another's compute, that compute loses this share for as long as
  // they overlap (core/overlapped_pair.hpp).
  virtual double all_to_all_sm_share() const { return 0; }

  // Seconds the host needs to issue one phase of one layer for one micro-batch (on `tp` ranks), when it cannot
  // run ahead of the GPU through that layer (a host synchronisation inside it): the phase takes at least this
  // long, and an F&B composite at least its halves' sum (one host thread issues both). 0: the GPU never waits.
  virtual double host_time(const Layer& layer, const LayerWork& work, Phase phase, int tp) const { return 0; }
};

// A cost model over another: it answers what it knows (measured, fitted) and passes every other question
// to the model below, which must outlive it. Profiled and calibrated models derive from it and override
// only what they change.
class CostModelOver : public CostModel {
 public:
  explicit CostModelOver(const CostModel& below) : below_(below) {}

  double phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& tp_link,
                    int tp) const override {
    return below_.phase_time(layer, work, phase, gpu, tp_link, tp);
  }
  double cp_ring_time(const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& cp_link) const override {
    return below_.cp_ring_time(work, phase, gpu, cp_link);
  }
  double expert_comm_time(const LayerWork& work, Phase phase, const AllToAllLinks& links) const override {
    return below_.expert_comm_time(work, phase, links);
  }
  double serving_time(const Layer& layer, const ServingWork& work, const GpuSpec& gpu, const LinkSpec& tp_link,
                      int tp) const override {
    return below_.serving_time(layer, work, gpu, tp_link, tp);
  }
  bool serving_time_monotone() const override { return below_.serving_time_monotone(); }
  double collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const override {
    return below_.collective_time(kind, bytes, ranks, link);
  }
  LinkSpec p2p_link(const LinkSpec& nominal) const override { return below_.p2p_link(nominal); }
  double optimizer_step_time(double parameters, const GpuSpec& gpu, const StateWidths& widths) const override {
    return below_.optimizer_step_time(parameters, gpu, widths);
  }
  double model_state_bytes_per_parameter(int dp, int zero, const StateWidths& widths) const override {
    return below_.model_state_bytes_per_parameter(dp, zero, widths);
  }
  double memory_reserve_bytes() const override { return below_.memory_reserve_bytes(); }
  double overlapped_fb_time(double forward_s, double backward_s) const override {
    return below_.overlapped_fb_time(forward_s, backward_s);
  }
  double full_backward_saving(const Layer& layer, const LayerWork& work, int tp) const override {
    return below_.full_backward_saving(layer, work, tp);
  }
  double action_overhead_s() const override { return below_.action_overhead_s(); }
  bool full_backward_one_action() const override { return below_.full_backward_one_action(); }
  double transfer_compute_slowdown() const override { return below_.transfer_compute_slowdown(); }
  double transfer_post_s() const override { return below_.transfer_post_s(); }
  double all_to_all_sm_share() const override { return below_.all_to_all_sm_share(); }
  double host_time(const Layer& layer, const LayerWork& work, Phase phase, int tp) const override {
    return below_.host_time(layer, work, phase, tp);
  }

 protected:
  const CostModel& below_;
};

// A measured optimizer step (seconds per parameter, the default state's widths) for a state kept at
// `widths`: scaled as `below` scales its own time from the default widths to those.
inline double measured_optimizer_time(double s_per_parameter, double parameters, const GpuSpec& gpu,
                                      const StateWidths& widths, const CostModel& below) {
  const double measured = s_per_parameter * parameters;
  if (!widths.optimizer_bytes) return measured;
  const double base = below.optimizer_step_time(parameters, gpu, {widths.bf16_grads, std::nullopt});
  return base > 0 ? measured * below.optimizer_step_time(parameters, gpu, widths) / base : measured;
}

}  // namespace pw
