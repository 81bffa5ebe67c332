#include "core/analytic_cost_model.hpp"

#include "core/serving_work.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace pw {

namespace {

void check_fraction(const char* field, double value) {
  if (!(value > 0 && value <= 1)) throw_bad_input("cost model: {} = {} is not in (0, 1]; give a fraction of peak such as 0.7", field, value);
}

void check_non_negative(const char* field, double value) {
  if (!(value >= 0) || !std::isfinite(value)) throw_bad_input("cost model: {} = {} is negative or not finite; give a value >= 0", field, value);
}

double rate_time(double amount, double rate, const std::string& gpu, const char* what) {
  if (amount <= 0) return 0;
  if (!(rate > 0)) throw_bad_input("gpu {}: {} is {}; give a positive value in the cluster's gpu", gpu, what, rate);
  return amount / rate;
}

}  // namespace

void validate(const AnalyticCostParams& p) {
  check_fraction("gemm_efficiency", p.gemm_efficiency);
  check_fraction("fp8_gemm_efficiency", p.fp8_gemm_efficiency);
  check_fraction("attention_efficiency", p.attention_efficiency);
  check_fraction("memory_efficiency", p.memory_efficiency);
  check_fraction("collective_efficiency", p.collective_efficiency);
  check_fraction("p2p_efficiency", p.p2p_efficiency);
  if (!(p.tp_overlap >= 0 && p.tp_overlap <= 1)) throw_bad_input("cost model: tp_overlap = {} is not in [0, 1]; give the hidden fraction of tp collectives", p.tp_overlap);
  if (!(p.fb_overlap >= 0 && p.fb_overlap <= 1)) throw_bad_input("cost model: fb_overlap = {} is not in [0, 1]; give the hidden fraction of the shorter half of an F&B", p.fb_overlap);
  check_non_negative("kernel_overhead_s", p.kernel_overhead_s);
  check_non_negative("optimizer_bytes_per_parameter", p.optimizer_bytes_per_parameter);
  check_non_negative("weight_bytes_per_parameter", p.weight_bytes_per_parameter);
  check_non_negative("grad_bytes_per_parameter", p.grad_bytes_per_parameter);
  check_non_negative("optimizer_state_bytes_per_parameter", p.optimizer_state_bytes_per_parameter);
  check_non_negative("memory_reserve_bytes", p.memory_reserve_bytes);
  if (!(p.all_to_all_sm_share >= 0 && p.all_to_all_sm_share < 1))
    throw_bad_input("cost model: all_to_all_sm_share = {} is not in [0, 1); give the share of the GPU's SMs an expert "
                    "all-to-all holds (0.15: 20 of 132)",
                    p.all_to_all_sm_share);
  if (!(p.moe_load_imbalance >= 1) || !std::isfinite(p.moe_load_imbalance))
    throw_bad_input("cost model: moe_load_imbalance = {} is below 1 or not finite; give the busiest rank's tokens over "
                    "the average (1: balanced)",
                    p.moe_load_imbalance);
  check_non_negative("moe_host_s", p.moe_host_s);
}

namespace {

struct ParamField {
  const char* name;
  double AnalyticCostParams::*field;
};

constexpr ParamField kParamFields[] = {
    {"gemm_efficiency", &AnalyticCostParams::gemm_efficiency},
    {"fp8_gemm_efficiency", &AnalyticCostParams::fp8_gemm_efficiency},
    {"attention_efficiency", &AnalyticCostParams::attention_efficiency},
    {"memory_efficiency", &AnalyticCostParams::memory_efficiency},
    {"kernel_overhead_s", &AnalyticCostParams::kernel_overhead_s},
    {"collective_efficiency", &AnalyticCostParams::collective_efficiency},
    {"p2p_efficiency", &AnalyticCostParams::p2p_efficiency},
    {"tp_overlap", &AnalyticCostParams::tp_overlap},
    {"optimizer_bytes_per_parameter", &AnalyticCostParams::optimizer_bytes_per_parameter},
    {"weight_bytes_per_parameter", &AnalyticCostParams::weight_bytes_per_parameter},
    {"grad_bytes_per_parameter", &AnalyticCostParams::grad_bytes_per_parameter},
    {"optimizer_state_bytes_per_parameter", &AnalyticCostParams::optimizer_state_bytes_per_parameter},
    {"memory_reserve_bytes", &AnalyticCostParams::memory_reserve_bytes},
    {"fb_overlap", &AnalyticCostParams::fb_overlap},
    {"moe_load_imbalance", &AnalyticCostParams::moe_load_imbalance},
    {"all_to_all_sm_share", &AnalyticCostParams::all_to_all_sm_share},
    {"moe_host_s", &AnalyticCostParams::moe_host_s},
};

}  // namespace

void set_param(AnalyticCostParams& params, const std::string& name, double value) {
  std::string known;
  for (const ParamField& f : kParamFields) {
    if (name == f.name) {
      params.*f.field = value;
      return;
    }
    known += known.empty() ? f.name : std::string(", ") + f.name;
  }
  throw_bad_input("--cost-param: unknown parameter '{}'; known: {}", name, known);
}

void set_param(AnalyticCostParams& params, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  double value = 0;
  size_t used = 0;
  try {
    if (eq != std::string::npos) value = std::stod(assignment.substr(eq + 1), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (eq == std::string::npos || eq == 0 || used == 0 || used != assignment.size() - eq - 1)
    throw_bad_input("--cost-param: '{}' is not NAME=VALUE; for example gemm_efficiency=0.65", assignment);
  set_param(params, assignment.substr(0, eq), value);
}

AnalyticCostParams executor_cost_params() {
  AnalyticCostParams p;
  p.moe_host_s = 0;
  return p;
}

AnalyticCostModel::AnalyticCostModel(AnalyticCostParams params) : params_(params) { validate(params_); }

double AnalyticCostModel::compute_time(const PhaseWork& work, const GpuSpec& gpu) const {
  // The busiest ep rank's share of routed GEMMs beyond the average, at the rate of the GEMMs they are among.
  const double extra_routed = work.routed_padded ? 0 : (params_.moe_load_imbalance - 1) * work.routed_gemm_flops;
  const bool routed_fp8 = work.fp8_gemm_flops > 0 && work.gemm_flops < work.routed_gemm_flops;
  return rate_time(work.gemm_flops + (routed_fp8 ? 0 : extra_routed), gpu.peak_flops * params_.gemm_efficiency, gpu.name,
                   "peak_flops") +
         rate_time(routed_fp8 ? extra_routed : 0, gpu.fp8_peak_flops * params_.fp8_gemm_efficiency, gpu.name,
                   "fp8_peak_tflops") +
         rate_time(work.fp8_gemm_flops, gpu.fp8_peak_flops * params_.fp8_gemm_efficiency, gpu.name, "fp8_peak_tflops") +
         rate_time(work.attention_flops, gpu.peak_flops * params_.attention_efficiency, gpu.name, "peak_flops") +
         rate_time(work.memory_bytes, gpu.hbm_bytes_per_s * params_.memory_efficiency, gpu.name, "hbm_bytes_per_s") +
         work.kernels * params_.kernel_overhead_s;
}

double AnalyticCostModel::serving_time(const Layer&, const ServingWork& work, const GpuSpec& gpu, const LinkSpec& tp_link,
                                       int tp) const {
  const double bandwidth = gpu.hbm_bytes_per_s * params_.memory_efficiency;
  const double gemm = std::max(rate_time(work.gemm_flops, gpu.peak_flops * params_.gemm_efficiency, gpu.name, "peak_flops") +
                                   rate_time(work.fp8_gemm_flops, gpu.fp8_peak_flops * params_.fp8_gemm_efficiency, gpu.name,
                                             "fp8_peak_tflops"),
                               rate_time(work.weight_bytes, bandwidth, gpu.name, "hbm_bytes_per_s"));
  const double attention =
      std::max(rate_time(work.attention_flops, gpu.peak_flops * params_.attention_efficiency, gpu.name, "peak_flops"),
               rate_time(work.kv_bytes, bandwidth, gpu.name, "hbm_bytes_per_s"));
  double comm = 0;
  for (const Collective& c : work.collectives) comm += serving_collective_time(c, tp, tp_link);
  // Each kernel's fixed time (its launch in the step's graph, its first and last waves) beside its work: what
  // a small batch of a large model over many GPUs is made of.
  return gemm + attention + rate_time(work.elementwise_bytes, bandwidth, gpu.name, "hbm_bytes_per_s") + comm +
         work.kernels * params_.kernel_overhead_s;
}

double AnalyticCostModel::serving_collective_time(const Collective& c, int tp, const LinkSpec& link) const {
  if (tp <= 1 || c.bytes <= 0) return 0;
  if (c.kind != CollectiveKind::AllReduce || link.inter_node || c.bytes > kCustomAllReduceMaxBytes)
    return collective_time(c.kind, c.bytes, tp, link);
  // vLLM's custom all-reduce: every rank reaches every other directly, so its two steps (reduce-scatter,
  // all-gather) each take one latency, not a ring's tp - 1.
  const double n = tp;
  return 2 * ((n - 1) / n * c.bytes / (link.bandwidth_bytes_per_s * params_.collective_efficiency) + link.latency_s);
}

double AnalyticCostModel::phase_work_time(const PhaseWork& work, const GpuSpec& gpu, const LinkSpec& tp_link,
                                          int tp) const {
  double comm = 0;
  for (const Collective& c : work.collectives) comm += collective_time(c.kind, c.bytes, tp, tp_link);
  return compute_time(work, gpu) + (1 - params_.tp_overlap) * comm;
}

double AnalyticCostModel::full_backward_saving(const Layer& layer, const LayerWork&, int) const {
  if (!layer.explicit_costs || !layer.explicit_costs->backward_s) return 0;
  const ExplicitCosts& c = *layer.explicit_costs;
  return std::max(0.0, c.backward_input_s + c.backward_weight_s - *c.backward_s);
}

double AnalyticCostModel::phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                                     const LinkSpec& tp_link, int tp) const {
  // Explicit costs are measurements or the user's own numbers: used as given, nothing added.
  if (work.forward_s || work.backward_input_s || work.backward_weight_s) {
    switch (phase) {
      case Phase::Forward: return work.forward_s.value_or(0);
      case Phase::BackwardInput: return work.backward_input_s.value_or(0);
      case Phase::BackwardWeight: return work.backward_weight_s.value_or(0);
    }
  }
  if (layer.explicit_costs) {
    switch (phase) {
      case Phase::Forward: return layer.explicit_costs->forward_s;
      case Phase::BackwardInput: return layer.explicit_costs->backward_input_s;
      case Phase::BackwardWeight: return layer.explicit_costs->backward_weight_s;
    }
  }
  switch (phase) {
    case Phase::Forward: return phase_work_time(work.forward, gpu, tp_link, tp);
    case Phase::BackwardInput:
      return phase_work_time(work.recompute, gpu, tp_link, tp) + phase_work_time(work.backward_input, gpu, tp_link, tp);
    case Phase::BackwardWeight: return phase_work_time(work.backward_weight, gpu, tp_link, tp);
  }
  return 0;
}

double AnalyticCostModel::host_time(const Layer& layer, const LayerWork& work, Phase phase, int) const {
  if (params_.moe_host_s == 0 || layer.explicit_costs || work.routed_parameters <= 0) return 0;
  const double issued = work.forward.kernels + work.backward_input.kernels + work.backward_weight.kernels;
  if (issued == 0) return 0;
  double kernels = 0;
  switch (phase) {
    case Phase::Forward: kernels = work.forward.kernels; break;
    case Phase::BackwardInput: kernels = work.recompute.kernels + work.backward_input.kernels; break;
    case Phase::BackwardWeight: kernels = work.backward_weight.kernels; break;
  }
  return params_.moe_host_s * kernels / issued;
}

double AnalyticCostModel::ring_wait(const PhaseWork& work, const GpuSpec& gpu, const LinkSpec& cp_link) const {
  if (work.cp_ring_steps <= 0 || work.cp_ring_step_bytes <= 0) return 0;
  // cp_ring_steps + 1 chunks of attention, each of the first steps overlapping one chunk's transfer: a
  // step costs the longer of the two, so only a transfer longer than its chunk's attention shows.
  const LinkSpec link = p2p_link(cp_link);
  const double transfer = link.latency_s + work.cp_ring_step_bytes / link.bandwidth_bytes_per_s;
  const double chunk = rate_time(work.attention_flops, gpu.peak_flops * params_.attention_efficiency, gpu.name, "peak_flops") /
                       (work.cp_ring_steps + 1);
  return work.cp_ring_steps * std::max(0.0, transfer - chunk);
}

double AnalyticCostModel::cp_ring_time(const LayerWork& work, Phase phase, const GpuSpec& gpu, const LinkSpec& cp_link) const {
  switch (phase) {
    case Phase::Forward: return ring_wait(work.forward, gpu, cp_link);
    case Phase::BackwardInput: return ring_wait(work.recompute, gpu, cp_link) + ring_wait(work.backward_input, gpu, cp_link);
    case Phase::BackwardWeight: return ring_wait(work.backward_weight, gpu, cp_link);
  }
  return 0;
}

double AnalyticCostModel::all_to_all_time(double bytes, const AllToAllLinks& l, const RoutedDispatch& dispatch) const {
  if (l.ranks <= 1 || bytes <= 0) return 0;
  const auto over = [&](double volume, const LinkSpec& link) {
    if (volume <= 0) return 0.0;
    if (!(link.bandwidth_bytes_per_s > 0))
      throw_bad_input("cluster: link bandwidth is {} B/s; give a positive bandwidth", link.bandwidth_bytes_per_s);
    return link.latency_s + volume / (link.bandwidth_bytes_per_s * params_.collective_efficiency);
  };
  // Each rank sends bytes / ep to every member (itself too, a local copy) at once: the peers inside its node
  // share its NVLink bandwidth, those across nodes its network bandwidth, both at a collective's busbw.
  const double to_each = bytes / l.ranks;
  double in_node = l.in_node * to_each, across = l.across * to_each;
  const int per_node = l.in_node + 1;
  const int nodes = l.ranks / per_node;
  if (dispatch.node_dedup && l.across > 0 && nodes > 1 && dispatch.top_k > 0 && dispatch.experts > 0) {
    // One copy of a token to each other node that holds any of its top_k experts (uniform routing over the
    // experts, spread evenly over the ep group's N nodes): P(a node is missed) = C(E - E/N, k) / C(E, k).
    // With group-limited routing and whole groups on each node, a node is missed when none of its G/N groups
    // is among the token's top g of the G groups: C(G - G/N, g) / C(G, g), g = min(top_groups, top_k) (every
    // chosen group taken to hold one of the token's experts, the most nodes the limit allows), or uniform
    // routing's where that misses more. Groups that straddle nodes do not cap
    // the nodes a token reaches: routing stays uniform there.
    const auto missed_from = [](double all, double per, int picks) {
      double missed = 1;
      for (int i = 0; i < picks; ++i) missed *= std::max(0.0, all - per - i) / (all - i);
      return missed;
    };
    const bool grouped = dispatch.groups > 0 && dispatch.top_groups < dispatch.groups && dispatch.groups % nodes == 0;
    double missed = missed_from(dispatch.experts, dispatch.experts / nodes, dispatch.top_k);
    if (grouped)  // a cap: never more nodes than uniform routing reaches (a token of few experts)
      missed = std::max(missed, missed_from(dispatch.groups, dispatch.groups / nodes,
                                            std::min(dispatch.top_groups, dispatch.top_k)));
    const double token_bytes = bytes / dispatch.top_k;
    across = token_bytes * (nodes - 1) * (1 - missed);
    // Inside each node every copy goes to its expert's GPU: those arriving from other nodes are forwarded.
    in_node = bytes * l.in_node / per_node;
  }
  return std::max(over(in_node, l.in_node_link), over(across, l.across_link));
}

double AnalyticCostModel::phase_expert_comm(const PhaseWork& work, const AllToAllLinks& links) const {
  const double load = work.routed_padded ? 1.0 : params_.moe_load_imbalance;
  double t = 0;
  for (double bytes : work.all_to_alls) t += all_to_all_time(bytes * load, links, work.dispatch);
  for (const Collective& c : work.etp_collectives) t += collective_time(c.kind, c.bytes * load, links.etp, links.etp_link);
  return t;
}

double AnalyticCostModel::expert_comm_time(const LayerWork& work, Phase phase, const AllToAllLinks& links) const {
  switch (phase) {
    case Phase::Forward: return phase_expert_comm(work.forward, links);
    case Phase::BackwardInput: return phase_expert_comm(work.recompute, links) + phase_expert_comm(work.backward_input, links);
    case Phase::BackwardWeight: return phase_expert_comm(work.backward_weight, links);
  }
  return 0;
}

double AnalyticCostModel::collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const {
  if (ranks <= 1 || bytes <= 0) return 0;
  if (!(link.bandwidth_bytes_per_s > 0)) throw_bad_input("cluster: link bandwidth is {} B/s; give a positive bandwidth", link.bandwidth_bytes_per_s);
  // Ring algorithms: each rank sends (n-1)/n of the array per pass in n-1 steps; all-reduce is a
  // reduce-scatter followed by an all-gather, twice the traffic and the steps.
  const double n = ranks;
  const double bw = link.bandwidth_bytes_per_s * params_.collective_efficiency;
  const double one_pass = (n - 1) / n * bytes / bw + (n - 1) * link.latency_s;
  return kind == CollectiveKind::AllReduce ? 2 * one_pass : one_pass;
}

LinkSpec AnalyticCostModel::p2p_link(const LinkSpec& nominal) const {
  return LinkSpec{nominal.bandwidth_bytes_per_s * params_.p2p_efficiency, nominal.latency_s, nominal.inter_node};
}

double AnalyticCostModel::overlapped_fb_time(double forward_s, double backward_s) const {
  if (params_.fb_overlap == 0) return 0;
  return forward_s + backward_s - params_.fb_overlap * std::min(forward_s, backward_s);
}

double AnalyticCostModel::optimizer_step_time(double parameters, const GpuSpec& gpu, const StateWidths& widths) const {
  // Adam is elementwise: its time is the bytes it touches over the achievable HBM bandwidth. A narrower
  // state is read and written narrower; the master weights' 16-bit remainder needs their bf16 half read.
  double bytes = params_.optimizer_bytes_per_parameter;
  if (widths.optimizer_bytes)
    bytes = std::max(0.0, bytes - 2 * (params_.optimizer_state_bytes_per_parameter - *widths.optimizer_bytes) +
                              params_.weight_bytes_per_parameter);
  return rate_time(parameters * bytes, gpu.hbm_bytes_per_s * params_.memory_efficiency, gpu.name, "hbm_bytes_per_s");
}

double AnalyticCostModel::model_state_bytes_per_parameter(int dp, int zero, const StateWidths& widths) const {
  const double d = std::max(dp, 1);
  const auto share = [&](double bytes, int from_level) { return zero >= from_level ? bytes / d : bytes; };
  // A bf16 gradient is 2 bytes whatever grad_bytes_per_parameter counts for the default (fp32) buffer.
  const double grads = widths.bf16_grads ? 2.0 : params_.grad_bytes_per_parameter;
  return share(params_.weight_bytes_per_parameter, 3) + share(grads, 2) +
         share(widths.optimizer_bytes.value_or(params_.optimizer_state_bytes_per_parameter), 1);
}

}  // namespace pw
