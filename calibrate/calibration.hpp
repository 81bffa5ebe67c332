#pragma once
// A calibration: the cost terms fitted to what one machine measured (a profile's layer times and link
// samples, executor runs), what they were fitted on, and how well they fit. Written and read as
// calibration.json ({"format": "pipewright-calibration", "version": 1}; docs/calibration.md).
#include <optional>
#include <cmath>
#include <string>
#include <vector>

#include "calibrate/fit.hpp"
#include "calibrate/fit_check.hpp"
#include "core/cost_model.hpp"
#include "profiler/profile.hpp"

namespace pw {

// One layer kind and phase: time = overhead_s + flops_ref x (flops / flops_ref)^flop_exponent x s_per_flop
// + bytes x s_per_byte, where flops and bytes are layer_work()'s for the layer's shape and micro-batch
// (PhaseWork::flops(), memory_bytes). With flop_exponent 1 (a kernel whose rate does not depend on the
// size) the compute term is flops x s_per_flop; above 1, each FLOP costs more the larger the layer (on a
// CPU, as the working set leaves the caches), below 1 less (a GPU at small sizes), s_per_flop being the
// rate at flops_ref (the largest FLOP count fitted). A coefficient of 0 means that term did not help the
// fit or is not in its form (its rate is then not known).
struct LayerFit {
  std::string kind;  // "embedding", "block", "head"
  Phase phase = Phase::Forward;
  double overhead_s = 0;
  double s_per_flop = 0;
  double s_per_byte = 0;
  double flop_exponent = 1;
  double flops_ref = 1;
  std::string form = "overhead + rate + bytes";  // which terms the fit chose (layer_fit.hpp)
  // How far off the chosen form was when it predicted the largest profiled size(s) from the smaller ones,
  // in percent; NaN when fewer than 3 sizes were profiled.
  double extrapolation_error_pct = std::nan("");
  FitQuality quality;
  std::vector<Residual> residuals;

  double compute_flops(double flops) const {
    return flop_exponent == 1 || flops <= 0 ? flops : flops_ref * std::pow(flops / flops_ref, flop_exponent);
  }
  double predict(const PhaseWork& work) const {
    return overhead_s + s_per_flop * compute_flops(work.flops()) + s_per_byte * work.memory_bytes;
  }
};

// A profiled entry kept as measured: the calibrated model uses it as is for that exact layer and
// micro-batch shape, and the fit everywhere else.
struct MeasuredLayer {
  std::string kind, shape;
  int micro_batch_size = 1;
  int seq_len = 1;
  double forward_s = 0, backward_input_s = 0, backward_weight_s = 0;
  std::optional<double> selective_recompute_s;  // blocks: what B adds with selective recomputation, if measured
};

// time = latency_s + bytes / bandwidth_bytes_per_s for one point-to-point transfer. src = dst = -1: every
// measured pair pooled (what the model uses); otherwise one measured pair.
struct LinkFit {
  int src = -1, dst = -1;
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
  FitQuality quality;
  std::vector<Residual> residuals;
};

// One measured ring collective, as a profile records it (profiler/profile.hpp).
using CollectiveSample = CollectiveProfile;

// The bus bandwidth a collective of this kind reaches, as a fraction of its link's: time = steps x link
// latency + traffic x bytes / (efficiency x link bandwidth), with the ring's steps and traffic
// (all-reduce 2 (n-1) and 2 (n-1)/n; reduce-scatter and all-gather n-1 and (n-1)/n).
struct CollectiveFit {
  CollectiveKind kind = CollectiveKind::AllReduce;
  double efficiency = 1;
  FitQuality quality;
  std::vector<Residual> residuals;
};

// The executor's costs beyond the layers' own times, fitted to runs. In the simulator: every compute
// action's layer time x compute_scale, plus dispatch_s per phase it runs (F, B, W: 1; BW: 2; an F&B: 3),
// transfer_s on every point-to-point transfer, and transfer_slowdown (compute runs 1 + transfer_slowdown
// times longer while a transfer to or from its rank is in flight; fitted from traces, 0 without them).
struct RunOverheads {
  bool fitted = false;  // false: no runs; the defaults below change nothing
  double compute_scale = 1;
  double dispatch_s = 0;
  double transfer_s = 0;
  double transfer_slowdown = 0;
  FitQuality compute_quality;  // per rank busy time (per action with a trace)
  FitQuality step_quality;     // step times of the runs fitted on
  std::vector<Residual> step_residuals;
};

// A run the calibration read.
struct RunSource {
  std::string path;
  std::string trace;  // its --trace file, or empty
  std::string model, schedule;
  int pp = 1, vpp = 1, microbatches = 1, micro_batch_size = 1, seq_len = 1;
  double measured_step_s = 0;
  bool held_out = false;
};

// A prediction for something left out of the fit, before calibration and after. NaN: not available
// (no GPU to evaluate the analytic defaults on; no profile entry for the run's shape).
struct HeldOutPoint {
  std::string what;   // "block forward b=8 s=32", a run's path
  double measured_s = 0;
  double analytic_s = 0;   // the analytic defaults
  double profiled_s = 0;   // the profile alone (runs only)
  double calibrated_s = 0;
};

struct Calibration {
  std::string tool;  // "pipewright <version> calibrate"
  MachineInfo machine;
  std::string profile_path, profile_tool;
  std::vector<RunSource> runs;
  double holdout_fraction = 0;
  std::string analytic_gpu;  // the GPU the held-out analytic errors were computed for, or empty

  std::vector<LayerFit> layers;
  std::vector<MeasuredLayer> measured;
  double optimizer_s_per_parameter = 0;  // from the profile; 0: the base model's
  std::optional<LinkFit> link;           // all pairs pooled
  std::vector<LinkFit> link_pairs;
  std::vector<CollectiveFit> collectives;
  RunOverheads overheads;

  std::vector<HeldOutPoint> held_out_layers;
  std::vector<HeldOutPoint> held_out_runs;
  FitCheck fit_check;  // the verdict on the fit (calibrate/fit_check.hpp)
  std::vector<std::string> warnings;

  const LayerFit* layer_fit(const std::string& kind, Phase phase) const;
};

const char* phase_name(Phase phase);  // "forward", "backward_input", "backward_weight"

std::string calibration_to_json_text(const Calibration& c);
// BadInput naming `source` and the field for anything missing, malformed, of another format or version.
Calibration calibration_from_json_text(const std::string& text, const std::string& source);
Calibration load_calibration(const std::string& path);

}  // namespace pw
