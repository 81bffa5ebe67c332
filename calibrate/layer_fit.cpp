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
    c.mlp = get("mlp") == "swiglu" ? MlpKind::SwiGlu : MlpKind::Gelu;
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

// The non-negative fit of overhead, compute and bytes for one exponent, on the points `use` selects.
LayerFit fit_with_exponent(const std::vector<const PhaseWork*>& phases, const Eigen::VectorXd& y,
                           const std::vector<Eigen::Index>& use, double exponent, double flops_ref) {
  LayerFit f;
  f.flop_exponent = exponent;
  f.flops_ref = flops_ref;
  const auto n = static_cast<Eigen::Index>(use.size());
  Eigen::MatrixXd X(n, 3);
  Eigen::VectorXd t(n);
  for (Eigen::Index r = 0; r < n; ++r) {
    const PhaseWork& p = *phases[static_cast<size_t>(use[static_cast<size_t>(r)])];
    X(r, 0) = 1;
    X(r, 1) = f.compute_flops(p.flops());
    X(r, 2) = p.memory_bytes;
    t(r) = y(use[static_cast<size_t>(r)]);
  }
  const Eigen::VectorXd c = fit_non_negative(X, t);
  f.overhead_s = c(0);
  f.s_per_flop = c(1);
  f.s_per_byte = c(2);
  return f;
}

}  // namespace

LayerFit fit_phase(const std::vector<const PhaseWork*>& phases, const Eigen::VectorXd& y, bool choose_exponent) {
  std::vector<Eigen::Index> all;
  double flops_ref = 0;
  for (Eigen::Index r = 0; r < y.size(); ++r) {
    all.push_back(r);
    flops_ref = std::max(flops_ref, phases[static_cast<size_t>(r)]->flops());
  }
  if (!(flops_ref > 0)) flops_ref = 1;
  double exponent = 1;
  if (choose_exponent) {
    // The exponent is the one whose fit on the smaller layers best predicts the largest (what a fit is
    // used for is extrapolating to larger micro-batches); 1 unless another predicts it better.
    Eigen::Index largest = 0;
    for (Eigen::Index r = 1; r < y.size(); ++r)
      if (phases[static_cast<size_t>(r)]->flops() > phases[static_cast<size_t>(largest)]->flops()) largest = r;
    std::vector<Eigen::Index> rest;
    for (Eigen::Index r : all)
      if (phases[static_cast<size_t>(r)]->flops() < phases[static_cast<size_t>(largest)]->flops()) rest.push_back(r);
    double best = std::numeric_limits<double>::infinity();
    for (int step = 0; step <= kExponentSteps && rest.size() >= 2; ++step) {
      const double e = 1 + step * kExponentStep;
      const LayerFit trial = fit_with_exponent(phases, y, rest, e, flops_ref);
      const double error = std::abs(trial.predict(*phases[static_cast<size_t>(largest)]) - y(largest)) /
                           std::max(y(largest), 1e-12);
      if (error < best - 1e-12) {
        best = error;
        exponent = e;
      }
    }
  }
  return fit_with_exponent(phases, y, all, exponent, flops_ref);
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
      LayerFit f = fit_phase(phases, y, distinct.size() >= 3);
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
