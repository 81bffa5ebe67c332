#pragma once
// A cost model that takes layer times, the link and the optimizer's rate from a measured profile where the
// profile has them, and asks another cost model (the analytic one) for everything else.
#include <optional>

#include "core/cost_model.hpp"
#include "core/workload.hpp"
#include "profiler/profile.hpp"

namespace pw {

class ProfiledCostModel : public CostModel {
 public:
  // Layer times are looked up for `model`'s shape at `workload`'s micro-batch size and sequence length; with
  // tp > 1 (not profiled) or no matching entry the fallback answers. `fallback` must outlive this model.
  ProfiledCostModel(Profile profile, const Model& model, const Workload& workload, const CostModel& fallback);

  std::string name() const override { return "profiled"; }
  // The profiled median of the phase; BackwardInput adds the forward with full recomputation (the CPU
  // kernels recompute nothing themselves).
  double phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& tp_link,
                    int tp) const override;
  double collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const override;
  // The first measured link when the profile has one.
  LinkSpec p2p_link(const LinkSpec& nominal) const override;
  double optimizer_step_time(double parameters, const GpuSpec& gpu) const override;
  double model_state_bytes_per_parameter(int dp, bool distributed_optimizer) const override;
  double memory_reserve_bytes() const override;

  // The profile entry used for layers of this kind, or null when the fallback answers for them.
  const LayerProfile* entry_for(LayerKind kind) const;

 private:
  Profile profile_;
  std::optional<TransformerConfig> config_;
  Workload workload_;
  const CostModel& fallback_;
};

}  // namespace pw
