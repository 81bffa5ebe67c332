#pragma once
// A cost model that takes layer times, the link and the optimizer's rate from a measured profile where the
// profile has them, and asks another cost model (the one below it in the chain) for everything else.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/cost_model.hpp"
#include "core/workload.hpp"
#include "profiler/profile.hpp"

namespace pw {

// Which of a model's distinct layers a profile answers for at one workload, and why the others are not.
struct ProfileCoverage {
  std::vector<std::string> profiled;  // layer kinds ("embedding", "block", "moe-block", "head") timed by the profile
  std::vector<std::string> missing;   // layer kinds the next cost model answers for
  std::string reason;                 // why they are missing (empty when none is)
};

class ProfiledCostModel : public CostModelOver {
 public:
  // Layer times are looked up for `model`'s shapes at the micro-batch size, sequence length and recompute
  // mode of the LayerWork asked about, so one profiled model serves every micro-batch size a search tries.
  // `fallback` must outlive this model.
  ProfiledCostModel(Profile profile, const Model& model, const CostModel& fallback);

  std::string name() const override { return "profiled"; }
  // The profiled median of the phase; BackwardInput adds the forward with full recomputation and the
  // measured softmax rebuild with selective recomputation. tp > 1, explicit layers and shapes the profile
  // lacks: the fallback.
  double phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& tp_link,
                    int tp) const override;
  // The first measured link when the profile has one, for links inside a node (a profile measures one
  // node; a link between nodes is the model's below).
  LinkSpec p2p_link(const LinkSpec& nominal) const override;
  // The expert all-to-alls and the collectives as the model below times them, over a CPU profile's
  // measured link where they stay inside a node.
  double expert_comm_time(const LayerWork& work, Phase phase, const AllToAllLinks& links) const override;
  double collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const override;
  double optimizer_step_time(double parameters, const GpuSpec& gpu, const StateWidths& widths) const override;
  // 0 for a layer the profile times: its measured phases already include whatever the host made them wait.
  double host_time(const Layer& layer, const LayerWork& work, Phase phase, int tp) const override;
  double full_backward_saving(const Layer& layer, const LayerWork& work, int tp) const override;
  // The measured runtime's time per compute call (RuntimeProfile::action_s) when the profile has one, a full
  // backward being one call; the model below's otherwise.
  double action_overhead_s() const override;
  bool full_backward_one_action() const override;
  // The measured runtime's time to post a send or receive (RuntimeProfile::transfer_s); the model below's
  // otherwise.
  double transfer_post_s() const override;
  // The profile's serving rates for the layer's kind and shape at tp 1 (profiler/serving_rates.hpp); the
  // model below otherwise.
  double serving_time(const Layer& layer, const ServingWork& work, const GpuSpec& gpu, const LinkSpec& tp_link,
                      int tp) const override;
  // Measured rates: a larger batch may read faster.
  bool serving_time_monotone() const override { return false; }

  // The profile entry used for `layer` at this micro-batch (profile_kind and layer_shape find it), or null
  // when the fallback answers (tp > 1: the profile is of one device; selective recomputation of a block
  // without a measured rebuild, or of modules beyond the attention core, which the profiler never reruns).
  const LayerProfile* entry_for(const Layer& layer, int micro_batch_size, int seq_len,
                                Recompute recompute = Recompute::None, int tp = 1,
                                RecomputeModules modules = {}) const;
  // The model's distinct layer kinds at `workload` (seq_len 0: the model's).
  ProfileCoverage coverage(const Model& model, const Workload& workload) const;

  const Profile& profile() const { return profile_; }

 private:
  int serving_key(const Layer& layer) const;  // embedding 0, dense block 1, MoE block 2, head 3

  Profile profile_;
  std::optional<TransformerConfig> config_;
  // The serving rates' index in profile_.serving->kinds per serving_key, -1 for none.
  std::array<int, 4> serving_kind_{-1, -1, -1, -1};
};

}  // namespace pw
