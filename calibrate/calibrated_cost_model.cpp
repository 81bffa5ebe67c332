#include "calibrate/calibrated_cost_model.hpp"

#include <cmath>

#include "calibrate/layer_fit.hpp"
#include "calibrate/link_fit.hpp"
#include "core/error.hpp"

namespace pw {
namespace {

void signature_of(const LayerWork& w, double out[6]) {
  out[0] = w.forward.flops();
  out[1] = w.forward.memory_bytes;
  out[2] = w.backward_input.flops();
  out[3] = w.backward_input.memory_bytes;
  out[4] = w.backward_weight.flops();
  out[5] = w.backward_weight.memory_bytes;
}

bool same(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

bool has_work(const PhaseWork& p) { return p.flops() > 0 || p.memory_bytes > 0 || p.kernels > 0; }

}  // namespace

CalibratedCostModel::CalibratedCostModel(Calibration calibration, const CostModel& base)
    : CostModelOver(base), calibration_(std::move(calibration)) {
  known_.reserve(calibration_.measured.size());
  for (size_t i = 0; i < calibration_.measured.size(); ++i) {
    const MeasuredLayer& m = calibration_.measured[i];
    Known k{&m, layer_kind_from_name(m.kind), {}};
    signature_of(profiled_layer_work(m.kind, m.shape, m.micro_batch_size, m.seq_len,
                                     fmt::format("layers.measured[{}]", i)),
                 k.signature);
    known_.push_back(k);
  }
}

// Matched by the work itself rather than by the model's shape: the cost model sees a layer and its
// LayerWork only, and equal FLOPs and bytes in every phase mean the same layer at the same micro-batch.
const CalibratedCostModel::Known* CalibratedCostModel::measured_for(LayerKind kind, const LayerWork& work) const {
  double sig[6];
  signature_of(work, sig);
  for (const Known& k : known_) {
    if (k.kind != kind) continue;
    bool match = true;
    for (int i = 0; i < 6 && match; ++i) match = same(sig[i], k.signature[i]);
    if (match) return &k;
  }
  return nullptr;
}

double CalibratedCostModel::layer_seconds(const Layer& layer, const LayerWork& work, Phase phase, int tp) const {
  if (layer.kind == LayerKind::Explicit) return -1;
  const std::string kind = layer_kind_name(layer.kind);
  const LayerFit* fit = calibration_.layer_fit(kind, phase);
  const LayerFit* forward_fit = calibration_.layer_fit(kind, Phase::Forward);
  const Known* k = tp == 1 ? measured_for(layer.kind, work) : nullptr;
  if (!k && !fit) return -1;
  double t = 0;
  if (k) {
    t = phase == Phase::Forward ? k->entry->forward_s
        : phase == Phase::BackwardInput ? k->entry->backward_input_s
                                        : k->entry->backward_weight_s;
  } else {
    t = fit->predict(phase_work(work, phase));
  }
  if (phase != Phase::BackwardInput || !has_work(work.recompute)) return t;
  // B runs the recomputation first: the measured forward (full) or rebuild (selective, of the attention
  // core: the one module the executor reruns) where there is one, else the forward fit on the recomputed
  // work.
  if (k && work.recompute_mode == Recompute::Full) return t + k->entry->forward_s;
  if (k && work.recompute_mode == Recompute::Selective && k->entry->selective_recompute_s &&
      work.recompute_modules.is_default())
    return t + *k->entry->selective_recompute_s;
  if (forward_fit) return t + forward_fit->predict(work.recompute);
  return -1;
}

double CalibratedCostModel::phase_time(const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                                       const LinkSpec& tp_link, int tp) const {
  if (work.forward_s || work.backward_input_s || work.backward_weight_s)
    return below_.phase_time(layer, work, phase, gpu, tp_link, tp);
  const double compute = layer_seconds(layer, work, phase, tp);
  if (compute < 0) return below_.phase_time(layer, work, phase, gpu, tp_link, tp);
  double comm = 0;
  if (tp > 1) {
    for (const Collective& c : phase_work(work, phase).collectives) comm += collective_time(c.kind, c.bytes, tp, tp_link);
    if (phase == Phase::BackwardInput)
      for (const Collective& c : work.recompute.collectives) comm += collective_time(c.kind, c.bytes, tp, tp_link);
  }
  return compute * calibration_.overheads.compute_scale + comm;
}

double CalibratedCostModel::collective_time(CollectiveKind kind, double bytes, int ranks, const LinkSpec& link) const {
  for (const CollectiveFit& f : calibration_.collectives) {
    if (f.kind != kind) continue;
    if (ranks <= 1 || bytes <= 0) return 0;
    if (!(link.bandwidth_bytes_per_s > 0))
      throw_bad_input("cluster: link bandwidth is {} B/s; give a positive bandwidth", link.bandwidth_bytes_per_s);
    return ring_steps(kind, ranks) * link.latency_s +
           ring_traffic(kind, ranks) * bytes / (f.efficiency * link.bandwidth_bytes_per_s);
  }
  return below_.collective_time(kind, bytes, ranks, link);
}

LinkSpec CalibratedCostModel::p2p_link(const LinkSpec& nominal) const {
  // The fit is of links inside the profiled node; one between nodes is the model's below.
  LinkSpec l = calibration_.link && !nominal.inter_node
                   ? LinkSpec{calibration_.link->bandwidth_bytes_per_s, calibration_.link->latency_s}
                   : below_.p2p_link(nominal);
  l.latency_s += calibration_.overheads.transfer_s;
  return l;
}

double CalibratedCostModel::optimizer_step_time(double parameters, const GpuSpec& gpu, const StateWidths& widths) const {
  if (calibration_.optimizer_s_per_parameter > 0)
    return measured_optimizer_time(calibration_.optimizer_s_per_parameter, parameters, gpu, widths, below_);
  return below_.optimizer_step_time(parameters, gpu, widths);
}

std::unique_ptr<CostModel> load_calibrated_cost_model(const std::string& path, const CostModel& base) {
  try {
    return std::make_unique<CalibratedCostModel>(load_calibration(path), base);
  } catch (const Error& e) {
    throw Error(ErrorKind::BadInput, fmt::format("--calibration: {}", e.what()));
  }
}

}  // namespace pw
