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

// The FLOP exponents the forms with one try: 0.5, 0.505, ..., 1.5 (below 1: a kernel that uses the machine
// better as it grows, as a GPU does at small micro-batches; above 1: worse, as a CPU does once the working
// set leaves the caches).
constexpr double kMinExponent = 0.5;
constexpr double kExponentStep = 0.005;
constexpr int kExponentSteps = 200;
constexpr double kMaxExponent = kMinExponent + kExponentSteps * kExponentStep;

// One kind and phase over its measured points (`phases[i]`'s work measured as y(i) seconds). The form is
// one of: overhead; rate; bandwidth; overhead + rate; overhead + bandwidth; rate^e; overhead + rate + bytes;
// overhead + rate^e (a size is a point's FLOPs, then its bytes). From 3 distinct sizes on, it is the one
// whose fit on the smaller sizes best predicts the largest (from 4 sizes, the two largest, each from the
// sizes below it), among the forms with no more parameters than those fits have sizes; ties go to the
// simpler form. With fewer, nothing can be validated: overhead + rate + bytes, the most general linear
// form (overhead when no point has any work). Then the form is fitted on every point, and LayerFit::extrapolation_error_pct says how well it
// predicted the held-back sizes.
LayerFit fit_phase(const std::vector<const PhaseWork*>& phases, const Eigen::VectorXd& y);

bool is_fit_form(const std::string& name);
std::string fit_form_names();  // "'rate', 'overhead + rate', ..."

// Fits every kind and phase the entries hold. BadInput naming `source` when a kind has fewer than two
// distinct micro-batch shapes (nothing to fit a slope on); a warning is appended when a kind has fewer
// distinct shapes than parameters (3).
std::vector<LayerFit> fit_layers(const std::vector<LayerProfile>& entries, const std::string& source,
                                 std::vector<std::string>& warnings);

}  // namespace pw
