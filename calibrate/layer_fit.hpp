#pragma once
// The layer-cost fit: per layer kind and phase, time = overhead + FLOPs^e x s_per_flop + bytes x s_per_byte
// (non-negative), over a profile's entries (micro-batch sizes, sequence lengths, shapes). The FLOPs and
// bytes are layer_work()'s for each entry's shape, so the fit predicts shapes that were not profiled.
#include <Eigen/Dense>

#include <string>
#include <vector>

#include "calibrate/calibration.hpp"
#include "core/layer_work.hpp"
#include "profiler/profile.hpp"

namespace pw {

// The transformer dimensions a profile's shape text gives (the inverse of layer_shape() for that kind;
// the fields the kind's text leaves out stay 0). BadInput "<where>: shape '...' ..." for text that
// layer_shape() would not write.
TransformerConfig config_from_shape(LayerKind kind, const std::string& shape, const std::string& where);
LayerKind layer_kind_from_name(const std::string& kind);

// The work of a profiled layer: its kind and shape at its micro-batch size and sequence length, tp 1,
// no recomputation, unfused attention (what the CPU kernels run).
LayerWork profiled_layer_work(const std::string& kind, const std::string& shape, int micro_batch_size, int seq_len,
                              const std::string& where);

const PhaseWork& phase_work(const LayerWork& work, Phase phase);
double measured_seconds(const LayerProfile& entry, Phase phase);  // the median

// "block forward b=8 s=32" and the like.
std::string entry_label(const LayerProfile& entry);

// The exponents fit_phase() tries: 1, 1.005, ..., 1.3.
constexpr double kExponentStep = 0.005;
constexpr int kExponentSteps = 60;

// One kind and phase over its measured points (`phases[i]`'s work measured as y(i) seconds): with
// `choose_exponent` (3 or more sizes), the FLOP exponent whose fit on all but the largest point predicts
// that point best, else 1; then the fit on every point.
LayerFit fit_phase(const std::vector<const PhaseWork*>& phases, const Eigen::VectorXd& y, bool choose_exponent);

// Fits every kind and phase the entries hold. BadInput naming `source` when a kind has fewer than two
// distinct micro-batch shapes (nothing to fit a slope on); a warning is appended when a kind has fewer
// distinct shapes than parameters (3).
std::vector<LayerFit> fit_layers(const std::vector<LayerProfile>& entries, const std::string& source,
                                 std::vector<std::string>& warnings);

}  // namespace pw
