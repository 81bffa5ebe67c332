#pragma once
// The calibrated cost model: layer times measured where the calibration kept a measurement for that exact
// layer and micro-batch shape, the layer fit everywhere else; the fitted link and collective efficiency;
// the run overheads as cost terms the simulator charges (compute scale, dispatch per action phase, fixed
// cost per transfer). Memory and whatever the calibration does not cover come from the base model.
#include <memory>
#include <string>
#include <vector>

#include "calibrate/calibration.hpp"
#include "core/cost_model.hpp"

namespace pw {

class CalibratedCostModel : public CostModelOver {
 public:
  // `base` must outlive this model. Throws BadInput for a measured entry whose shape text is unreadable.
  CalibratedCostModel(Calibration calibration, const CostModel& base);

  std::string name() const override { return "calibrated"; }
  // Explicit layers (and work with explicit times): the base model. Otherwise (measured or fitted compute)
  // x compute_scale, plus for B the recomputation it includes, plus with tp > 1 the phase's collectives.
  double phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& tp_link,
                    int tp) const override;
  double collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const override;
  // The pooled link fit (any link inside a node), its latency plus the per-transfer cost; for a link
  // between nodes, or without a link fit, the base model's link plus that cost.
  LinkSpec p2p_link(const LinkSpec& nominal) const override;
  double optimizer_step_time(double parameters, const GpuSpec& gpu, const StateWidths& widths) const override;
  double action_overhead_s() const override { return calibration_.overheads.dispatch_s; }
  double transfer_compute_slowdown() const override { return calibration_.overheads.transfer_slowdown; }

  const Calibration& calibration() const { return calibration_; }

  // The layer compute of one phase before compute_scale (no collectives): measured or fitted; negative
  // when neither covers the layer's kind.
  double layer_seconds(const Layer& layer, const LayerWork& work, Phase phase, int tp) const;

 private:
  struct Known {
    const MeasuredLayer* entry;
    LayerKind kind;
    double signature[6];  // FLOPs and bytes of F, B, W: how a layer's work is matched to the entry
  };
  const Known* measured_for(LayerKind kind, const LayerWork& work) const;

  Calibration calibration_;
  std::vector<Known> known_;
};

// Loads a calibration.json as the cost model that simulate, plan and run use with --calibration FILE.
// BadInput "--calibration: ..." on any problem with the file. `base` (the analytic model with any
// --cost-param) answers for memory and whatever the calibration lacks, and must outlive the result.
std::unique_ptr<CostModel> load_calibrated_cost_model(const std::string& path, const CostModel& base);

}  // namespace pw
