#include "profiler/profiled_cost_model.hpp"

namespace pw {

ProfiledCostModel::ProfiledCostModel(Profile profile, const Model& model, const Workload& workload,
                                     const CostModel& fallback)
    : profile_(std::move(profile)), config_(model.transformer), workload_(workload), fallback_(fallback) {}

const LayerProfile* ProfiledCostModel::entry_for(LayerKind kind) const {
  if (!config_ || kind == LayerKind::Explicit || workload_.tp > 1) return nullptr;
  const int seq = workload_.seq_len > 0 ? workload_.seq_len : config_->max_seq_len;
  return profile_.find(layer_kind_name(kind), layer_shape(*config_, kind), workload_.micro_batch_size, seq);
}

double ProfiledCostModel::phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                                     const LinkSpec& tp_link, int tp) const {
  const LayerProfile* p = tp > 1 ? nullptr : entry_for(layer.kind);
  if (!p) return fallback_.phase_time(layer, work, phase, gpu, tp_link, tp);
  switch (phase) {
    case Phase::Forward: return p->forward.median_s;
    case Phase::BackwardInput:
      return p->backward_input.median_s + (workload_.recompute == Recompute::Full ? p->forward.median_s : 0);
    case Phase::BackwardWeight: return p->backward_weight.median_s;
  }
  return 0;
}

double ProfiledCostModel::collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const {
  return fallback_.collective_time(kind, bytes, ranks, link);
}

LinkSpec ProfiledCostModel::p2p_link(const LinkSpec& nominal) const {
  if (profile_.links.empty()) return fallback_.p2p_link(nominal);
  const LinkProfile& l = profile_.links.front();
  return LinkSpec{l.bandwidth_bytes_per_s, l.latency_s};
}

double ProfiledCostModel::optimizer_step_time(double parameters, const GpuSpec& gpu) const {
  if (profile_.optimizer_s_per_parameter > 0) return profile_.optimizer_s_per_parameter * parameters;
  return fallback_.optimizer_step_time(parameters, gpu);
}

double ProfiledCostModel::model_state_bytes_per_parameter(int dp, bool distributed_optimizer) const {
  return fallback_.model_state_bytes_per_parameter(dp, distributed_optimizer);
}

double ProfiledCostModel::memory_reserve_bytes() const { return fallback_.memory_reserve_bytes(); }

}  // namespace pw
