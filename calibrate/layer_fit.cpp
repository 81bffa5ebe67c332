#include "calibrate/layer_fit.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"

namespace pw {
namespace {

int parse_int(const std::string& value, const std::string& key, const std::string& shape, const std::string& where) {
  int x = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (ec != std::errc() || end != value.data() + value.size() || x < 1)
    throw_bad_input("{}: shape '{}' has {}={}; it must be a positive whole number", where, shape, key, value);
  return x;
}

}  // namespace

LayerKind layer_kind_from_name(const std::string& kind) {
  if (kind == "embedding") return LayerKind::Embedding;
  if (kind == "head") return LayerKind::Head;
  if (kind == "block") return LayerKind::Block;
  throw_bad_input("layer kind '{}' is not embedding, block or head", kind);
}

TransformerConfig config_from_shape(LayerKind kind, const std::string& shape, const std::string& where) {
  std::map<std::string, std::string> fields;
  size_t pos = 0;
  while (pos < shape.size()) {
    size_t end = shape.find(' ', pos);
    if (end == std::string::npos) end = shape.size();
    const std::string item = shape.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw_bad_input("{}: shape '{}' has '{}', which is not key=value; use the shape `pipewright profile` writes", where,
                      shape, item);
    fields[item.substr(0, eq)] = item.substr(eq + 1);
    pos = end + 1;
  }
  auto get = [&](const char* key) -> const std::string& {
    auto it = fields.find(key);
    if (it == fields.end())
      throw_bad_input("{}: shape '{}' has no {}=; use the shape `pipewright profile` writes", where, shape, key);
    return it->second;
  };
  TransformerConfig c;
  c.hidden = parse_int(get("hidden"), "hidden", shape, where);
  if (kind == LayerKind::Embedding || kind == LayerKind::Head) c.vocab = parse_int(get("vocab"), "vocab", shape, where);
  if (kind == LayerKind::Embedding || kind == LayerKind::Block) c.learned_positions = get("positions") == "learned";
  if (kind == LayerKind::Head || kind == LayerKind::Block)
    c.norm = get("norm") == "rmsnorm" ? NormKind::RmsNorm : NormKind::LayerNorm;
  if (kind == LayerKind::Block) {
    c.heads = parse_int(get("heads"), "heads", shape, where);
    c.kv_heads = parse_int(get("kv_heads"), "kv_heads", shape, where);
    c.head_dim = parse_int(get("head_dim"), "head_dim", shape, where);
    c.ffn = parse_int(get("ffn"), "ffn", shape, where);
    const std::string& mlp = get("mlp");
    c.mlp = mlp == "swiglu" ? MlpKind::SwiGlu : mlp == "geglu" ? MlpKind::GeGlu : mlp == "relu2" ? MlpKind::ReluSquared : MlpKind::Gelu;
    const std::string& bias = get("bias");
    c.bias = bias == "all";
    c.qkv_bias = bias == "qkv";
  }
  c.layers = 1;
  c.max_seq_len = 1;
  // The text must be what layer_shape() writes for these dimensions: a misspelt value ("mlp=swishglu")
  // would otherwise fit a different layer without a word.
  if (layer_shape(c, kind) != shape)
    throw_bad_input("{}: shape '{}' is not one `pipewright profile` writes (read back as '{}'); profile the model again",
                    where, shape, layer_shape(c, kind));
  return c;
}

LayerWork profiled_layer_work(const std::string& kind_name, const std::string& shape, int micro_batch_size, int seq_len,
                              const std::string& where) {
  const LayerKind kind = layer_kind_from_name(kind_name);
  TransformerConfig c = config_from_shape(kind, shape, where);
  c.max_seq_len = seq_len;
  Model m;
  m.name = "profiled";
  m.transformer = c;
  m.layers.push_back(Layer{kind_name, kind, std::nullopt});
  Workload w;
  w.micro_batch_size = micro_batch_size;
  w.seq_len = seq_len;
  w.tp = 1;
  w.sequence_parallel = false;
  return layer_work(m, m.layers.front(), w);
}

const PhaseWork& phase_work(const LayerWork& work, Phase phase) {
  switch (phase) {
    case Phase::Forward: return work.forward;
    case Phase::BackwardInput: return work.backward_input;
    case Phase::BackwardWeight: return work.backward_weight;
  }
  return work.forward;
}

double measured_seconds(const LayerProfile& e, Phase phase) {
  switch (phase) {
    case Phase::Forward: return e.forward.median_s;
    case Phase::BackwardInput: return e.backward_input.median_s;
    case Phase::BackwardWeight: return e.backward_weight.median_s;
  }
  return 0;
}

std::string entry_label(const LayerProfile& e) {
  return fmt::format("{} b={} s={}", e.kind, e.micro_batch_size, e.seq_len);
}

namespace {

// The candidate forms, simplest first: a form is chosen over a simpler one only when it extrapolates
// strictly better.
// A form whose FLOPs or bytes are 0 at every point (an embedding's gather has no FLOPs) fits 0 there and
// loses to the others.
struct FitForm {
  const char* name;
  bool overhead, flops, bytes, exponent;
  int parameters;
};
constexpr FitForm kForms[] = {
    {"overhead", true, false, false, false, 1},
    {"rate", false, true, false, false, 1},
    {"bandwidth", false, false, true, false, 1},
    {"overhead + rate", true, true, false, false, 2},
    {"overhead + bandwidth", true, false, true, false, 2},
    {"rate^e", false, true, false, true, 2},
    {"overhead + rate + bytes", true, true, true, false, 3},
    {"overhead + rate^e", true, true, false, true, 3},
};

// The weighted relative squared error of `f` on the points `use` selects (what fit_non_negative minimises).
double relative_sse(const LayerFit& f, const std::vector<const PhaseWork*>& phases, const Eigen::VectorXd& y,
                    const std::vector<Eigen::Index>& use) {
  double sum = 0;
  for (Eigen::Index r : use) {
    const double e = (f.predict(*phases[static_cast<size_t>(r)]) - y(r)) / std::max(y(r), 1e-9);
    sum += e * e;
  }
  return sum;
}

// The non-negative fit of the form's terms for one exponent, on the points `use` selects.
LayerFit fit_with_exponent(const std::vector<const PhaseWork*>& phases, const Eigen::VectorXd& y,
                           const std::vector<Eigen::Index>& use, const FitForm& form, double exponent,
                           double flops_ref) {
  LayerFit f;
  f.form = form.name;
  f.flop_exponent = exponent;
  f.flops_ref = flops_ref;
  const auto n = static_cast<Eigen::Index>(use.size());
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(n, 3);
  Eigen::VectorXd t(n);
  for (Eigen::Index r = 0; r < n; ++r) {
    const PhaseWork& p = *phases[static_cast<size_t>(use[static_cast<size_t>(r)])];
    if (form.overhead) X(r, 0) = 1;
    if (form.flops) X(r, 1) = f.compute_flops(p.flops());
    if (form.bytes) X(r, 2) = p.memory_bytes;
    t(r) = y(use[static_cast<size_t>(r)]);
  }
  const Eigen::VectorXd c = fit_non_negative(X, t);
  f.overhead_s = c(0);
  f.s_per_flop = c(1);
  f.s_per_byte = c(2);
  return f;
}

// The form fitted on the points `use` selects; with an exponent, the one on the grid with the least
// relative error there (ties: the one nearer 1).
LayerFit fit_form(const std::vector<const PhaseWork*>& phases, const Eigen::VectorXd& y,
                  const std::vector<Eigen::Index>& use, const FitForm& form, double flops_ref) {
  if (!form.exponent) return fit_with_exponent(phases, y, use, form, 1, flops_ref);
  LayerFit best;
  double best_error = std::numeric_limits<double>::infinity(), best_distance = 0;
  for (int step = 0; step <= kExponentSteps; ++step) {
    const double e = kMinExponent + step * kExponentStep;
    const LayerFit trial = fit_with_exponent(phases, y, use, form, e, flops_ref);
    const double error = relative_sse(trial, phases, y, use), distance = std::abs(e - 1);
    if (error < best_error * (1 - 1e-9) || (error <= best_error * (1 + 1e-9) && distance < best_distance)) {
      best = trial;
      best_error = error;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

bool is_fit_form(const std::string& name) {
  return std::any_of(std::begin(kForms), std::end(kForms), [&](const FitForm& f) { return name == f.name; });
}

std::string fit_form_names() {
  std::string out;
  for (const FitForm& f : kForms) out += (out.empty() ? "'" : ", '") + std::string(f.name) + "'";
  return out;
}

LayerFit fit_phase(const std::vector<const PhaseWork*>& phases, const Eigen::VectorXd& y) {
  // A point's size: its FLOPs, then its bytes (an embedding has bytes only).
  auto size = [&](Eigen::Index r) {
    const PhaseWork& p = *phases[static_cast<size_t>(r)];
    return std::pair(p.flops(), p.memory_bytes);
  };
  std::vector<Eigen::Index> all;
  std::set<std::pair<double, double>> sizes;
  double flops_ref = 0;
  for (Eigen::Index r = 0; r < y.size(); ++r) {
    all.push_back(r);
    sizes.insert(size(r));
    flops_ref = std::max(flops_ref, phases[static_cast<size_t>(r)]->flops());
  }
  if (!(flops_ref > 0)) flops_ref = 1;
  // Validation: the largest size (the two largest from 4 sizes on), each predicted by the form fitted on
  // the sizes below it, since a fit is used to extrapolate to larger micro-batches. A form is a candidate
  // when every such fit has at least as many sizes as the form has parameters.
  const std::vector<std::pair<double, double>> ordered(sizes.begin(), sizes.end());
  const size_t validations = ordered.size() >= 4 ? 2 : ordered.size() == 3 ? 1 : 0;
  // No work at any point (an embedding's B): a fixed time. Otherwise, without validation, the most general
  // linear form.
  const FitForm* chosen = ordered.back() == std::pair(0.0, 0.0) ? &kForms[0] : &kForms[6];
  double chosen_error = std::numeric_limits<double>::quiet_NaN();
  if (validations > 0) {
    double best = std::numeric_limits<double>::infinity();
    for (const FitForm& form : kForms) {
      if (static_cast<size_t>(form.parameters) > ordered.size() - validations) continue;
      double sum = 0;
      int count = 0;
      for (size_t v = ordered.size() - validations; v < ordered.size(); ++v) {
        std::vector<Eigen::Index> below;
        for (Eigen::Index r : all)
          if (size(r) < ordered[v]) below.push_back(r);
        const LayerFit trial = fit_form(phases, y, below, form, flops_ref);
        for (Eigen::Index r : all)
          if (size(r) == ordered[v]) {
            sum += std::abs(trial.predict(*phases[static_cast<size_t>(r)]) - y(r)) / std::max(y(r), 1e-12);
            ++count;
          }
      }
      const double error = sum / count;
      if (error < best * (1 - 1e-9)) {
        best = error;
        chosen = &form;
      }
    }
    chosen_error = best * 100;
  }
  LayerFit f = fit_form(phases, y, all, *chosen, flops_ref);
  f.extrapolation_error_pct = chosen_error;
  return f;
}

std::vector<LayerFit> fit_layers(const std::vector<LayerProfile>& entries, const std::string& source,
                                 std::vector<std::string>& warnings) {
  std::map<std::string, std::vector<size_t>> by_kind;
  for (size_t i = 0; i < entries.size(); ++i) by_kind[entries[i].kind].push_back(i);
  std::vector<LayerFit> out;
  // Kinds in the order a model holds them.
  for (const char* kind : {"embedding", "block", "head"}) {
    auto it = by_kind.find(kind);
    if (it == by_kind.end()) continue;
    const std::vector<size_t>& idx = it->second;
    std::set<std::tuple<std::string, int, int>> distinct;
    for (size_t i : idx) distinct.insert({entries[i].shape, entries[i].micro_batch_size, entries[i].seq_len});
    if (distinct.size() < 2) {
      const LayerProfile& e = entries[idx.front()];
      throw_bad_input("{}: the {} layer is profiled at one micro-batch size only (b={} s={}); the fit needs 2 or more: "
                      "profile with --micro-batch-size 1 2 4",
                      source, kind, e.micro_batch_size, e.seq_len);
    }
    if (distinct.size() < 3)
      warnings.push_back(fmt::format("{}: the {} layer has {} micro-batch shapes for 3 parameters (overhead, FLOPs, "
                                     "bytes); its fit is not unique: profile 3 or more sizes",
                                     source, kind, distinct.size()));
    std::vector<LayerWork> work;
    for (size_t i : idx)
      work.push_back(profiled_layer_work(entries[i].kind, entries[i].shape, entries[i].micro_batch_size,
                                         entries[i].seq_len, fmt::format("{}: layers[{}]", source, i)));
    for (Phase phase : {Phase::Forward, Phase::BackwardInput, Phase::BackwardWeight}) {
      const auto n = static_cast<Eigen::Index>(idx.size());
      std::vector<const PhaseWork*> phases;
      Eigen::VectorXd y(n);
      for (Eigen::Index r = 0; r < n; ++r) {
        phases.push_back(&phase_work(work[static_cast<size_t>(r)], phase));
        y(r) = measured_seconds(entries[idx[static_cast<size_t>(r)]], phase);
      }
      LayerFit f = fit_phase(phases, y);
      f.kind = kind;
      f.phase = phase;
      for (Eigen::Index r = 0; r < n; ++r) {
        const LayerProfile& e = entries[idx[static_cast<size_t>(r)]];
        f.residuals.push_back({fmt::format("b={} s={}", e.micro_batch_size, e.seq_len), y(r),
                               f.predict(phase_work(work[static_cast<size_t>(r)], phase))});
      }
      f.quality = fit_quality(f.residuals);
      out.push_back(f);
    }
  }
  return out;
}

}  // namespace pw
