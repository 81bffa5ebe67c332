// calibration.json: writing and reading (docs/calibration.md).
#include <cmath>

#include <nlohmann/json.hpp>

#include "calibrate/calibration.hpp"
#include "calibrate/layer_fit.hpp"
#include "core/error.hpp"
#include "core/excerpt.hpp"
#include "core/json_text.hpp"
#include "core/special_values.hpp"

namespace pw {

namespace {

constexpr const char* kFormat = "pipewright-calibration";
constexpr int kFileVersion = 1;

using ojson = nlohmann::ordered_json;

// Not a number (an undefined R^2, a prediction that could not be made) is written as null.
ojson number(double x) { return std::isfinite(x) ? ojson(x) : ojson(nullptr); }
// A rate from its inverse coefficient; null when the term is 0 (the rate is not known).
ojson rate(double s_per_unit) { return s_per_unit > 0 ? ojson(1.0 / s_per_unit) : ojson(nullptr); }

ojson quality_json(const FitQuality& q) {
  return {{"points", q.points}, {"r2", number(q.r2)}, {"rms_error_pct", q.rms_error_pct}, {"max_error_pct", q.max_error_pct}};
}

ojson residuals_json(const std::vector<Residual>& rs) {
  ojson out = ojson::array();
  for (const Residual& r : rs) out.push_back({{"label", r.label}, {"measured_s", r.measured}, {"fitted_s", r.fitted}});
  return out;
}

ojson link_json(const LinkFit& l) {
  ojson j;
  if (l.src >= 0) {
    j["src"] = l.src;
    j["dst"] = l.dst;
  }
  j["latency_s"] = l.latency_s;
  j["bandwidth_bytes_per_s"] = l.bandwidth_bytes_per_s;
  j["quality"] = quality_json(l.quality);
  j["residuals"] = residuals_json(l.residuals);
  return j;
}

ojson held_out_json(const HeldOutPoint& p, bool runs) {
  ojson j = {{"what", p.what}, {"measured_s", p.measured_s}, {"analytic_s", number(p.analytic_s)}};
  if (runs) j["profiled_s"] = number(p.profiled_s);
  j["calibrated_s"] = number(p.calibrated_s);
  return j;
}

// ---- reading ----

double nan_or_number(const JsonFields& f, const std::string& key) { return f.optional_number(key).value_or(kNaN); }

FitQuality read_quality(const JsonFields& f) {
  f.reject_unknown({"points", "r2", "rms_error_pct", "max_error_pct"});
  FitQuality q;
  q.points = static_cast<int>(f.non_negative_integer("points"));
  q.r2 = nan_or_number(f, "r2");
  q.rms_error_pct = f.non_negative_number("rms_error_pct");
  q.max_error_pct = f.non_negative_number("max_error_pct");
  return q;
}

const nlohmann::json& array_field(const JsonFields& f, const std::string& key) {
  const nlohmann::json& v = f.required(key);
  if (!v.is_array()) f.fail(key, "must be an array");
  return f.array(key, kMaxProfileEntries, "entries");
}

std::vector<Residual> read_residuals(const JsonFields& f, const std::string& key) {
  std::vector<Residual> out;
  if (!f.has(key)) return out;
  const nlohmann::json& v = array_field(f, key);
  for (size_t i = 0; i < v.size(); ++i) {
    const JsonFields r(v[i], f.source(), f.name(key) + fmt::format("[{}].", i));
    r.reject_unknown({"label", "measured_s", "fitted_s"});
    out.push_back({r.string("label"), r.non_negative_number("measured_s"), r.number("fitted_s")});
  }
  return out;
}

Phase read_phase(const JsonFields& f, const std::string& key) {
  const std::string name = f.string(key);
  for (Phase p : {Phase::Forward, Phase::BackwardInput, Phase::BackwardWeight})
    if (name == phase_name(p)) return p;
  f.fail(key, fmt::format("is \"{}\"; give \"forward\", \"backward_input\" or \"backward_weight\"", excerpt(name)));
}

CollectiveKind read_collective_kind(const JsonFields& f, const std::string& key) {
  const std::string name = f.string(key);
  CollectiveKind k;
  if (!collective_from_name(name, k))
    f.fail(key, fmt::format("is \"{}\"; give \"all_reduce\", \"all_gather\" or \"reduce_scatter\"", excerpt(name)));
  return k;
}

std::string read_layer_kind(const JsonFields& f, const std::string& key) {
  const std::string kind = f.string(key);
  if (kind != "embedding" && kind != "block" && kind != "head")
    f.fail(key, fmt::format("is \"{}\"; give \"embedding\", \"block\" or \"head\"", excerpt(kind)));
  return kind;
}

LinkFit read_link(const JsonFields& f, bool pair) {
  f.reject_unknown({"src", "dst", "latency_s", "bandwidth_bytes_per_s", "quality", "residuals"});
  LinkFit l;
  if (pair) {
    l.src = static_cast<int>(f.non_negative_integer("src"));
    l.dst = static_cast<int>(f.non_negative_integer("dst"));
  }
  l.latency_s = f.figure("latency_s", kSecondsRange);
  l.bandwidth_bytes_per_s = f.positive_figure("bandwidth_bytes_per_s", kBandwidthRange);
  l.quality = read_quality(f.object("quality"));
  l.residuals = read_residuals(f, "residuals");
  return l;
}

FitCheck read_fit_check(const JsonFields& f) {
  f.reject_unknown({"verdict", "problems", "accepted", "step_r2", "held_out_error_pct", "profile_held_out_error_pct",
                    "held_out_tolerance_pct", "runs", "shared_runs"});
  FitCheck check;
  for (const auto& p : array_field(f, "problems")) {
    if (!p.is_string()) f.fail("problems", "must be an array of strings");
    check.problems.push_back(p.get<std::string>());
  }
  const std::string verdict = f.string("verdict");
  if (verdict != (check.poor() ? "poor" : "good"))
    f.fail("verdict", fmt::format("is \"{}\" with {} problems; a fit with problems is \"poor\", else \"good\"", verdict,
                                  check.problems.size()));
  check.accepted = f.boolean("accepted", false);
  check.step_r2 = nan_or_number(f, "step_r2");
  check.held_out_error_pct = nan_or_number(f, "held_out_error_pct");
  check.profile_held_out_error_pct = nan_or_number(f, "profile_held_out_error_pct");
  check.runs = static_cast<int>(f.non_negative_integer("runs"));
  check.shared_runs = static_cast<int>(f.non_negative_integer("shared_runs"));
  return check;
}

std::vector<HeldOutPoint> read_held_out(const JsonFields& f, const std::string& key, bool runs) {
  std::vector<HeldOutPoint> out;
  if (!f.has(key)) return out;
  const nlohmann::json& v = array_field(f, key);
  for (size_t i = 0; i < v.size(); ++i) {
    const JsonFields p(v[i], f.source(), f.name(key) + fmt::format("[{}].", i));
    if (runs) p.reject_unknown({"what", "measured_s", "analytic_s", "profiled_s", "calibrated_s"});
    else p.reject_unknown({"what", "measured_s", "analytic_s", "calibrated_s"});
    HeldOutPoint h;
    h.what = p.string("what");
    h.measured_s = p.positive_number("measured_s");
    h.analytic_s = nan_or_number(p, "analytic_s");
    h.profiled_s = runs ? nan_or_number(p, "profiled_s") : kNaN;
    h.calibrated_s = nan_or_number(p, "calibrated_s");
    out.push_back(h);
  }
  return out;
}

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::Forward: return "forward";
    case Phase::BackwardInput: return "backward_input";
    case Phase::BackwardWeight: return "backward_weight";
  }
  return "?";
}

const LayerFit* Calibration::layer_fit(const std::string& kind, Phase phase) const {
  for (const LayerFit& f : layers)
    if (f.kind == kind && f.phase == phase) return &f;
  return nullptr;
}

std::string calibration_to_json_text(const Calibration& c) {
  ojson j;
  j["format"] = kFormat;
  j["version"] = kFileVersion;
  j["tool"] = c.tool;
  ojson runs = ojson::array();
  for (const RunSource& r : c.runs)
    runs.push_back({{"path", r.path},
                    {"trace", r.trace},
                    {"model", r.model},
                    {"schedule", r.schedule},
                    {"pp", r.pp},
                    {"vpp", r.vpp},
                    {"microbatches", r.microbatches},
                    {"micro_batch_size", r.micro_batch_size},
                    {"seq_len", r.seq_len},
                    {"measured_step_time_s", r.measured_step_s},
                    {"held_out", r.held_out}});
  j["fitted_on"] = {{"machine",
                     {{"backend", c.machine.backend},
                      {"device", c.machine.device},
                      {"cores", c.machine.cores},
                      {"threads_per_rank", c.machine.threads_per_rank}}},
                    {"profile", {{"path", c.profile_path}, {"tool", c.profile_tool}}},
                    {"runs", runs},
                    {"holdout_fraction", c.holdout_fraction},
                    {"analytic_gpu", c.analytic_gpu}};

  ojson fits = ojson::array();
  for (const LayerFit& f : c.layers)
    fits.push_back({{"kind", f.kind},
                    {"phase", phase_name(f.phase)},
                    {"overhead_s", f.overhead_s},
                    {"s_per_flop", f.s_per_flop},
                    {"s_per_byte", f.s_per_byte},
                    {"flop_exponent", f.flop_exponent},
                    {"flops_ref", f.flops_ref},
                    {"form", f.form},
                    {"extrapolation_error_pct", std::isfinite(f.extrapolation_error_pct) ? ojson(f.extrapolation_error_pct) : ojson(nullptr)},
                    {"flops_per_s", rate(f.s_per_flop)},
                    {"bytes_per_s", rate(f.s_per_byte)},
                    {"quality", quality_json(f.quality)},
                    {"residuals", residuals_json(f.residuals)}});
  ojson measured = ojson::array();
  for (const MeasuredLayer& m : c.measured) {
    ojson e = {{"kind", m.kind},
               {"shape", m.shape},
               {"micro_batch_size", m.micro_batch_size},
               {"seq_len", m.seq_len},
               {"forward_s", m.forward_s},
               {"backward_input_s", m.backward_input_s},
               {"backward_weight_s", m.backward_weight_s}};
    if (m.selective_recompute_s) e["selective_recompute_s"] = *m.selective_recompute_s;
    measured.push_back(e);
  }
  j["layers"] = {{"model", "time = overhead_s + flops_ref x (flops / flops_ref)^flop_exponent x s_per_flop + bytes x s_per_byte"}, {"fits", fits}, {"measured", measured}};
  j["optimizer_s_per_parameter"] = c.optimizer_s_per_parameter;

  ojson pairs = ojson::array();
  for (const LinkFit& l : c.link_pairs) pairs.push_back(link_json(l));
  j["links"] = {{"pooled", c.link ? link_json(*c.link) : ojson(nullptr)}, {"pairs", pairs}};

  ojson collectives = ojson::array();
  for (const CollectiveFit& f : c.collectives)
    collectives.push_back({{"kind", collective_name(f.kind)},
                           {"efficiency", f.efficiency},
                           {"quality", quality_json(f.quality)},
                           {"residuals", residuals_json(f.residuals)}});
  j["collectives"] = collectives;

  const RunOverheads& o = c.overheads;
  j["run_overheads"] = {{"fitted", o.fitted},
                        {"compute_scale", o.compute_scale},
                        {"dispatch_s", o.dispatch_s},
                        {"transfer_s", o.transfer_s},
                        {"transfer_slowdown", o.transfer_slowdown},
                        {"compute_quality", quality_json(o.compute_quality)},
                        {"step_quality", quality_json(o.step_quality)},
                        {"step_residuals", residuals_json(o.step_residuals)}};

  ojson layers_out = ojson::array(), runs_out = ojson::array();
  for (const HeldOutPoint& p : c.held_out_layers) layers_out.push_back(held_out_json(p, false));
  for (const HeldOutPoint& p : c.held_out_runs) runs_out.push_back(held_out_json(p, true));
  j["held_out"] = {{"layers", layers_out}, {"runs", runs_out}};
  const FitCheck& check = c.fit_check;
  j["fit_check"] = {{"verdict", check.poor() ? "poor" : "good"},
                    {"problems", check.problems},
                    {"accepted", check.accepted},
                    {"step_r2", number(check.step_r2)},
                    {"held_out_error_pct", number(check.held_out_error_pct)},
                    {"profile_held_out_error_pct", number(check.profile_held_out_error_pct)},
                    {"held_out_tolerance_pct", kHeldOutTolerancePct},
                    {"runs", check.runs},
                    {"shared_runs", check.shared_runs}};
  j["warnings"] = c.warnings;
  return json_file_text(j, "calibration");
}

Calibration calibration_from_json_text(const std::string& text, const std::string& source) {
  const nlohmann::json doc = parse_json_text(text, source);
  const JsonFields top(doc, source);
  const std::string format = top.string("format");
  if (format != kFormat)
    top.fail("format", fmt::format("is \"{}\"; a calibration says \"{}\" (write one with pipewright calibrate --out)",
                                   excerpt(format), kFormat));
  const long version = top.positive_integer("version");
  if (version != kFileVersion) top.fail("version", fmt::format("is {}; this pipewright reads version {}", version, kFileVersion));
  top.reject_unknown({"format", "version", "tool", "fitted_on", "layers", "optimizer_s_per_parameter", "links",
                      "collectives", "run_overheads", "held_out", "fit_check", "warnings"});
  Calibration c;
  c.tool = top.optional_string("tool").value_or("");

  const JsonFields on = top.object("fitted_on");
  on.reject_unknown({"machine", "profile", "runs", "holdout_fraction", "analytic_gpu"});
  const JsonFields m = on.object("machine");
  m.reject_unknown({"backend", "device", "cores", "threads_per_rank"});
  c.machine.backend = m.string("backend");
  c.machine.device = m.string("device");
  c.machine.cores = static_cast<int>(m.non_negative_integer("cores"));
  c.machine.threads_per_rank = m.positive_int("threads_per_rank");
  const JsonFields p = on.object("profile");
  p.reject_unknown({"path", "tool"});
  c.profile_path = p.string("path");
  c.profile_tool = p.optional_string("tool").value_or("");
  const nlohmann::json& runs = array_field(on, "runs");
  for (size_t i = 0; i < runs.size(); ++i) {
    const JsonFields r(runs[i], source, fmt::format("fitted_on.runs[{}].", i));
    r.reject_unknown({"path", "trace", "model", "schedule", "pp", "vpp", "microbatches", "micro_batch_size", "seq_len",
                      "measured_step_time_s", "held_out"});
    RunSource s;
    s.path = r.string("path");
    s.trace = r.optional_string("trace").value_or("");
    s.model = r.string("model");
    s.schedule = r.string("schedule");
    s.pp = r.positive_int("pp");
    s.vpp = r.positive_int("vpp");
    s.microbatches = r.positive_int("microbatches");
    s.micro_batch_size = r.positive_int("micro_batch_size");
    s.seq_len = r.positive_int("seq_len");
    s.measured_step_s = r.positive_number("measured_step_time_s");
    s.held_out = r.boolean("held_out", false);
    c.runs.push_back(s);
  }
  c.holdout_fraction = on.non_negative_number("holdout_fraction", 0.0);
  c.analytic_gpu = on.optional_string("analytic_gpu").value_or("");

  const JsonFields layers = top.object("layers");
  layers.reject_unknown({"model", "fits", "measured"});
  const nlohmann::json& fits = array_field(layers, "fits");
  for (size_t i = 0; i < fits.size(); ++i) {
    const JsonFields f(fits[i], source, fmt::format("layers.fits[{}].", i));
    f.reject_unknown({"kind", "phase", "overhead_s", "s_per_flop", "s_per_byte", "flop_exponent", "flops_ref",
                      "form", "extrapolation_error_pct", "flops_per_s", "bytes_per_s", "quality", "residuals"});
    LayerFit l;
    l.kind = read_layer_kind(f, "kind");
    l.phase = read_phase(f, "phase");
    l.overhead_s = f.figure("overhead_s", kSecondsRange);
    l.s_per_flop = f.figure("s_per_flop", kSecondsPerUnitRange);
    l.s_per_byte = f.figure("s_per_byte", kSecondsPerUnitRange);
    if (f.has("flop_exponent")) l.flop_exponent = f.non_negative_number("flop_exponent");
    if (f.has("flops_ref")) l.flops_ref = f.non_negative_number("flops_ref");
    if (l.flop_exponent < kMinExponent || l.flop_exponent > kMaxExponent + 1e-9)
      f.fail("flop_exponent", fmt::format("is {}; it is between {} and {}", l.flop_exponent, kMinExponent, kMaxExponent));
    if (f.has("form")) {
      l.form = f.string("form");
      if (!is_fit_form(l.form)) f.fail("form", fmt::format("is '{}'; it is one of {}", excerpt(l.form), fit_form_names()));
    }
    if (f.has("extrapolation_error_pct"))
      l.extrapolation_error_pct = f.non_negative_number("extrapolation_error_pct");
    if (!(l.flops_ref > 0)) f.fail("flops_ref", "must be a positive FLOP count");
    l.quality = read_quality(f.object("quality"));
    l.residuals = read_residuals(f, "residuals");
    if (c.layer_fit(l.kind, l.phase)) f.fail("phase", fmt::format("{} {} is fitted twice; keep one", l.kind, phase_name(l.phase)));
    c.layers.push_back(l);
  }
  if (layers.has("measured")) {
    const nlohmann::json& measured = array_field(layers, "measured");
    for (size_t i = 0; i < measured.size(); ++i) {
      const JsonFields f(measured[i], source, fmt::format("layers.measured[{}].", i));
      f.reject_unknown({"kind", "shape", "micro_batch_size", "seq_len", "forward_s", "backward_input_s", "backward_weight_s",
                        "selective_recompute_s"});
      MeasuredLayer l;
      l.kind = read_layer_kind(f, "kind");
      l.shape = f.string("shape");
      l.micro_batch_size = f.positive_int("micro_batch_size");
      l.seq_len = f.positive_int("seq_len");
      l.forward_s = f.figure("forward_s", kSecondsRange);
      l.backward_input_s = f.figure("backward_input_s", kSecondsRange);
      l.backward_weight_s = f.figure("backward_weight_s", kSecondsRange);
      if (f.has("selective_recompute_s")) l.selective_recompute_s = f.figure("selective_recompute_s", kSecondsRange);
      c.measured.push_back(l);
    }
  }
  c.optimizer_s_per_parameter = top.figure("optimizer_s_per_parameter", kSecondsPerUnitRange, 0.0);

  if (top.has("links")) {
    const JsonFields l = top.object("links");
    l.reject_unknown({"pooled", "pairs"});
    if (l.has("pooled")) c.link = read_link(l.object("pooled"), false);
    if (l.has("pairs")) {
      const nlohmann::json& pairs = array_field(l, "pairs");
      for (size_t i = 0; i < pairs.size(); ++i)
        c.link_pairs.push_back(read_link(JsonFields(pairs[i], source, fmt::format("links.pairs[{}].", i)), true));
    }
  }
  if (top.has("collectives")) {
    const nlohmann::json& cs = array_field(top, "collectives");
    for (size_t i = 0; i < cs.size(); ++i) {
      const JsonFields f(cs[i], source, fmt::format("collectives[{}].", i));
      f.reject_unknown({"kind", "efficiency", "quality", "residuals"});
      CollectiveFit k;
      k.kind = read_collective_kind(f, "kind");
      k.efficiency = f.positive_figure("efficiency", kFactorRange);
      k.quality = read_quality(f.object("quality"));
      k.residuals = read_residuals(f, "residuals");
      c.collectives.push_back(k);
    }
  }
  if (top.has("run_overheads")) {
    const JsonFields o = top.object("run_overheads");
    o.reject_unknown({"fitted", "compute_scale", "dispatch_s", "transfer_s", "transfer_slowdown", "compute_quality",
                      "step_quality", "step_residuals"});
    RunOverheads& r = c.overheads;
    r.fitted = o.boolean("fitted", false);
    r.compute_scale = o.positive_figure("compute_scale", kFactorRange);
    r.dispatch_s = o.figure("dispatch_s", kSecondsRange);
    r.transfer_s = o.figure("transfer_s", kSecondsRange);
    r.transfer_slowdown = o.figure("transfer_slowdown", kFactorRange, 0.0);
    if (o.has("compute_quality")) r.compute_quality = read_quality(o.object("compute_quality"));
    if (o.has("step_quality")) r.step_quality = read_quality(o.object("step_quality"));
    r.step_residuals = read_residuals(o, "step_residuals");
  }
  if (top.has("held_out")) {
    const JsonFields h = top.object("held_out");
    h.reject_unknown({"layers", "runs"});
    c.held_out_layers = read_held_out(h, "layers", false);
    c.held_out_runs = read_held_out(h, "runs", true);
  }
  if (top.has("fit_check")) c.fit_check = read_fit_check(top.object("fit_check"));
  if (top.has("warnings")) {
    const nlohmann::json& w = array_field(top, "warnings");
    for (const auto& x : w) {
      if (!x.is_string()) top.fail("warnings", "must be an array of strings");
      c.warnings.push_back(x.get<std::string>());
    }
  }
  return c;
}

Calibration load_calibration(const std::string& path) {
  return calibration_from_json_text(read_text_file(path, "calibration"), path);
}

}  // namespace pw
