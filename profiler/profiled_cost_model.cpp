#include "profiler/profiled_cost_model.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace pw {

ProfiledCostModel::ProfiledCostModel(Profile profile, const Model& model, const CostModel& fallback)
    : CostModelOver(fallback), profile_(std::move(profile)), config_(model.transformer) {
  // Serving asks per layer and batch: each kind's rates are found here once, not by their names at every call.
  if (!profile_.serving || !config_) return;
  for (const Layer& layer : model.layers) {
    if (layer.kind == LayerKind::Explicit || layer.kind == LayerKind::Mtp) continue;
    const std::string kind = profile_kind(*config_, layer), shape = layer_shape(*config_, layer);
    const std::vector<ServingKindRates>& kinds = profile_.serving->kinds;
    for (size_t k = 0; k < kinds.size(); ++k)
      if (kinds[k].kind == kind && kinds[k].shape == shape) serving_kind_[serving_key(layer)] = static_cast<int>(k);
  }
}

int ProfiledCostModel::serving_key(const Layer& layer) const {
  switch (layer.kind) {
    case LayerKind::Embedding: return 0;
    case LayerKind::Block: return config_->moe_block(layer.block) ? 2 : 1;
    default: return 3;
  }
}

const LayerProfile* ProfiledCostModel::entry_for(const Layer& layer, int micro_batch_size, int seq_len,
                                                 Recompute recompute, int tp, RecomputeModules modules) const {
  if (!config_ || layer.kind == LayerKind::Explicit || tp > 1) return nullptr;
  const LayerProfile* p =
      profile_.find(profile_kind(*config_, layer), layer_shape(*config_, layer), micro_batch_size, seq_len);
  if (p && layer.kind == LayerKind::Block && recompute == Recompute::Selective &&
      (!p->selective_recompute || !modules.is_default()))
    return nullptr;
  return p;
}

ProfileCoverage ProfiledCostModel::coverage(const Model& model, const Workload& w) const {
  ProfileCoverage c;
  const int seq = w.seq_len > 0 ? w.seq_len : model.default_seq_len();
  bool selective_missing = false;
  for (const Layer& layer : model.layers) {
    const std::string kind = layer.kind == LayerKind::Explicit ? "explicit"
                             : config_                          ? profile_kind(*config_, layer)
                                                                : layer_kind_name(layer.kind);
    if (std::count(c.profiled.begin(), c.profiled.end(), kind) || std::count(c.missing.begin(), c.missing.end(), kind))
      continue;
    const bool found = entry_for(layer, w.micro_batch_size, seq, w.recompute, w.tp * w.cp, w.recompute_modules) != nullptr;
    (found ? c.profiled : c.missing).push_back(kind);
    if (!found && layer.kind == LayerKind::Block && w.recompute == Recompute::Selective && w.tp * w.cp == 1 && config_ &&
        profile_.find(kind, layer_shape(*config_, layer), w.micro_batch_size, seq))
      selective_missing = true;
  }
  if (c.missing.empty()) return c;
  if (!config_)
    c.reason = "explicit per-layer costs";
  else if (w.tp > 1)
    c.reason = fmt::format("tp {}: the profile is of one device", w.tp);
  else if (w.cp > 1)
    c.reason = fmt::format("cp {}: the profile is of whole sequences on one device", w.cp);
  else if (selective_missing && !w.recompute_modules.is_default())
    c.reason = fmt::format("the profile's selective recompute reruns core_attn, not {}", to_string(w.recompute_modules));
  else if (selective_missing)
    c.reason = "the profile has no selective-recompute time";
  else
    c.reason = fmt::format("the profile has no entry at micro-batch {} x {} tokens", w.micro_batch_size, seq);
  return c;
}

double ProfiledCostModel::phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                                     const LinkSpec& tp_link, int tp) const {
  // A cp rank runs a share of the sequence against all of its keys: no profiled length is that layer.
  const LayerProfile* p = entry_for(layer, work.micro_batch_size, work.seq_len, work.recompute_mode, tp * work.cp, work.recompute_modules);
  if (!p) return below_.phase_time(layer, work, phase, gpu, tp_link, tp);
  switch (phase) {
    case Phase::Forward: return p->forward.median_s;
    case Phase::BackwardInput: {
      double recompute = 0;
      if (layer.kind == LayerKind::Block && work.recompute_mode == Recompute::Full) recompute = p->forward.median_s;
      if (layer.kind == LayerKind::Block && work.recompute_mode == Recompute::Selective)
        recompute = p->selective_recompute->median_s;
      return p->backward_input.median_s + recompute;
    }
    case Phase::BackwardWeight: return p->backward_weight.median_s;
  }
  return 0;
}

double ProfiledCostModel::action_overhead_s() const {
  return profile_.runtime ? profile_.runtime->action_s : below_.action_overhead_s();
}

bool ProfiledCostModel::full_backward_one_action() const {
  return profile_.runtime.has_value() || below_.full_backward_one_action();
}

double ProfiledCostModel::transfer_post_s() const {
  return profile_.runtime ? profile_.runtime->transfer_s : below_.transfer_post_s();
}

double ProfiledCostModel::full_backward_saving(const Layer& layer, const LayerWork& work, int tp) const {
  const LayerProfile* p = entry_for(layer, work.micro_batch_size, work.seq_len, work.recompute_mode, tp * work.cp, work.recompute_modules);
  if (!p) return below_.full_backward_saving(layer, work, tp);
  if (!p->backward) return 0;
  // A recomputation runs in either case: what one pass saves is of B and W themselves.
  return std::max(0.0, p->backward_input.median_s + p->backward_weight.median_s - p->backward->median_s);
}

double ProfiledCostModel::host_time(const Layer& layer, const LayerWork& work, Phase phase, int tp) const {
  // The model below first: it answers 0 for most layers, and the profile lookup builds strings.
  const double below = below_.host_time(layer, work, phase, tp);
  if (below == 0 || entry_for(layer, work.micro_batch_size, work.seq_len, work.recompute_mode, tp * work.cp, work.recompute_modules)) return 0;
  return below;
}

LinkSpec ProfiledCostModel::p2p_link(const LinkSpec& nominal) const {
  if (profile_.links.empty() || nominal.inter_node) return below_.p2p_link(nominal);
  const LinkProfile& l = profile_.links.front();
  return LinkSpec{l.bandwidth_bytes_per_s, l.latency_s};
}

// Only a CPU profile's link is the one the exchanges run over (the executor's transport between threads or
// processes); NCCL's collectives on GPUs are not its point-to-point sends.
double ProfiledCostModel::expert_comm_time(const LayerWork& work, Phase phase, const AllToAllLinks& links) const {
  if (profile_.machine.backend != "cpu") return below_.expert_comm_time(work, phase, links);
  AllToAllLinks measured = links;
  measured.in_node_link = p2p_link(links.in_node_link);
  measured.etp_link = p2p_link(links.etp_link);
  return below_.expert_comm_time(work, phase, measured);
}

double ProfiledCostModel::collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const {
  if (profile_.machine.backend != "cpu") return below_.collective_time(kind, bytes, ranks, link);
  return below_.collective_time(kind, bytes, ranks, p2p_link(link));
}

double ProfiledCostModel::optimizer_step_time(double parameters, const GpuSpec& gpu, const StateWidths& widths) const {
  if (profile_.optimizer_s_per_parameter > 0)
    return measured_optimizer_time(profile_.optimizer_s_per_parameter, parameters, gpu, widths, below_);
  return below_.optimizer_step_time(parameters, gpu, widths);
}

double ProfiledCostModel::serving_time(const Layer& layer, const ServingWork& work, const GpuSpec& gpu,
                                       const LinkSpec& tp_link, int tp) const {
  if (tp == 1 && profile_.serving && config_ && layer.kind != LayerKind::Explicit && layer.kind != LayerKind::Mtp) {
    const int k = serving_kind_[serving_key(layer)];
    if (k >= 0) return serving_rates_time(profile_.serving->kinds[static_cast<size_t>(k)].rates, work);
  }
  return below_.serving_time(layer, work, gpu, tp_link, tp);
}

}  // namespace pw
