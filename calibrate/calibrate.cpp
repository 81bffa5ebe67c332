#include "calibrate/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "calibrate/calibrated_cost_model.hpp"
#include "calibrate/layer_fit.hpp"
#include "calibrate/link_fit.hpp"
#include "calibrate/run_fit.hpp"
#include "calibrate/run_record.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/special_values.hpp"
#include "core/version.hpp"
#include "profiler/profiled_cost_model.hpp"

namespace pw {
namespace {

template <typename Loader>
auto for_option(const char* option, Loader load) {
  try {
    return load();
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", option, e.what()));
  }
}

// A run is usable when it computed for real, on the profiled backend, a model whose every layer the
// profile measured (same kind and shape).
void check_run(const RunRecord& run, const Profile& profile, const std::string& profile_path) {
  if (run.compute != "real")
    throw_bad_input("{}: compute is \"{}\": its actions waited the predicted times; calibrate on runs with --compute real",
                    run.path, run.compute);
  if (!profile.machine.backend.empty() && run.backend != profile.machine.backend)
    throw_bad_input("{}: backend {} but {} was measured on {}; calibrate on runs and a profile of one machine", run.path,
                    run.backend, profile_path, profile.machine.backend);
  const Model& m = run.scenario.model;
  if (!m.transformer)
    throw_bad_input("{}: model '{}' gives explicit per-layer costs; calibrate on runs of the profiled transformer model",
                    run.path, m.name);
  for (const Layer& layer : m.layers) {
    const std::string kind = profile_kind(*m.transformer, layer);
    const std::string shape = layer_shape(*m.transformer, layer);
    const bool found = std::any_of(profile.layers.begin(), profile.layers.end(),
                                   [&](const LayerProfile& e) { return e.kind == kind && e.shape == shape; });
    if (!found)
      throw_bad_input("{}: the {} layer of model '{}' ({}) is not in {}; calibrate on runs of the profiled model",
                      run.path, kind, m.name, shape, profile_path);
  }
}

RunSource source_of(const RunRecord& r, const std::string& trace, bool held_out) {
  const Scenario& s = r.scenario;
  RunSource out;
  out.path = r.path;
  out.trace = trace;
  out.model = s.model.name;
  out.schedule = s.schedule;
  out.pp = s.parallel.pp;
  out.vpp = s.parallel.vpp;
  out.microbatches = s.parallel.microbatches;
  out.micro_batch_size = s.workload.micro_batch_size;
  out.seq_len = s.workload.seq_len;
  out.measured_step_s = r.measured_step_s;
  out.held_out = held_out;
  return out;
}

MeasuredLayer measured_of(const LayerProfile& e) {
  MeasuredLayer m;
  m.kind = e.kind;
  m.shape = e.shape;
  m.micro_batch_size = e.micro_batch_size;
  m.seq_len = e.seq_len;
  m.forward_s = e.forward.median_s;
  m.backward_input_s = e.backward_input.median_s;
  m.backward_weight_s = e.backward_weight.median_s;
  if (e.selective_recompute) m.selective_recompute_s = e.selective_recompute->median_s;
  return m;
}

}  // namespace

std::vector<std::pair<int, int>> held_out_shapes(const std::vector<LayerProfile>& entries, double fraction,
                                                 const std::string& source) {
  std::set<std::pair<int, int>> shapes;
  for (const LayerProfile& e : entries) shapes.insert({e.micro_batch_size, e.seq_len});
  std::vector<std::pair<int, int>> sorted(shapes.begin(), shapes.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return static_cast<long>(a.first) * a.second < static_cast<long>(b.first) * b.second;
  });
  if (fraction <= 0) return {};
  const int n = static_cast<int>(sorted.size());
  const int k = std::max(1, static_cast<int>(std::lround(fraction * n)));
  if (n - k < 2)
    throw_bad_input("--holdout {}: leaves {} of the {} micro-batch shapes of {} for the layer fit, which needs 2; lower "
                    "--holdout or profile more micro-batch sizes",
                    fraction, std::max(n - k, 0), n, source);
  return std::vector<std::pair<int, int>>(sorted.end() - k, sorted.end());
}

int held_out_run_count(int runs, double fraction) {
  if (fraction <= 0 || runs < 2) return 0;
  return std::clamp(static_cast<int>(std::lround(fraction * runs)), 1, runs - 1);
}

Calibration calibrate(const CalibrateInputs& in) {
  if (!(in.holdout >= 0 && in.holdout < 1))
    throw_bad_input("--holdout: must be a fraction in [0, 1), got {}", in.holdout);
  if (!in.traces.empty() && in.traces.size() != in.runs.size())
    throw_bad_input("--traces: {} trace{} for {} run{}; give one trace per run, in the same order, or none",
                    in.traces.size(), in.traces.size() == 1 ? "" : "s", in.runs.size(), in.runs.size() == 1 ? "" : "s");
  const Profile profile = for_option("--profile", [&] { return load_profile(in.profile); });
  if (profile.layers.empty())
    throw_bad_input("--profile: {} has no layer entries; write one with pipewright profile --micro-batch-size 1 2 4",
                    in.profile);
  // The fits are of dense layers' work (FLOPs and bytes by phase); an MoE block's expert GEMMs and
  // dispatch are not a term of them yet.
  for (const LayerProfile& e : profile.layers)
    if (e.kind == "moe-block")
      throw_bad_input("--profile: {} times MoE blocks (kind \"moe-block\"), which calibrate does not fit; plan, "
                      "simulate and run with --profile {} instead",
                      in.profile, in.profile);

  Calibration c;
  c.tool = fmt::format("pipewright {} calibrate", kVersion);
  c.machine = profile.machine;
  c.profile_path = in.profile;
  c.profile_tool = profile.tool;
  c.holdout_fraction = in.holdout;
  c.optimizer_s_per_parameter = profile.optimizer_s_per_parameter;

  // Layers: the largest micro-batch shapes held out, the rest fitted and kept as measured.
  const std::vector<std::pair<int, int>> held = held_out_shapes(profile.layers, in.holdout, in.profile);
  auto is_held = [&](const LayerProfile& e) {
    return std::find(held.begin(), held.end(), std::make_pair(e.micro_batch_size, e.seq_len)) != held.end();
  };
  std::vector<LayerProfile> train, test;
  for (const LayerProfile& e : profile.layers) (is_held(e) ? test : train).push_back(e);
  c.layers = fit_layers(train, in.profile, c.warnings);
  for (const LayerProfile& e : train) c.measured.push_back(measured_of(e));

  const LinkFits links = fit_links(profile.links, in.profile, c.warnings);
  c.link = links.pooled;
  c.link_pairs = links.pairs;
  // The profile's own collectives (the CUDA profiler's, with --links) and any given beside it.
  std::vector<CollectiveSample> collectives = profile.collectives;
  collectives.insert(collectives.end(), in.collectives.begin(), in.collectives.end());
  c.collectives = fit_collectives(collectives, c.warnings);
  if (profile.optimizer_s_per_parameter <= 0)
    c.warnings.push_back(fmt::format("{}: no optimizer time; the optimizer step comes from the analytic model", in.profile));

  // Runs: the last ones held out.
  std::vector<RunRecord> runs;
  std::string shared_runs;  // the paths of runs that found their machine shared
  int shared_count = 0;
  for (size_t i = 0; i < in.runs.size(); ++i) {
    RunRecord r = for_option("--runs", [&] { return load_run(in.runs[i]); });
    if (!in.traces.empty()) r.trace = for_option("--traces", [&] { return load_trace(in.traces[i]); });
    check_run(r, profile, in.profile);
    if (r.machine_shared) {
      shared_runs += (shared_runs.empty() ? "" : ", ") + r.path;
      ++shared_count;
    }
    runs.push_back(std::move(r));
  }
  if (shared_count > 0)
    c.warnings.push_back(fmt::format("--runs: {} of the {} runs were measured on a shared machine, as their `run` said "
                                     "(its machine_load): {}",
                                     shared_count, runs.size(), shared_runs));
  const int held_runs = held_out_run_count(static_cast<int>(runs.size()), in.holdout);
  if (in.holdout > 0 && runs.size() == 1)
    c.warnings.push_back("--holdout: one run only; it is fitted on and none is held out");
  const std::vector<RunRecord> fit_runs(runs.begin(), runs.end() - held_runs);
  for (size_t i = 0; i < runs.size(); ++i)
    c.runs.push_back(source_of(runs[i], in.traces.empty() ? "" : in.traces[i], i >= fit_runs.size()));

  const AnalyticCostModel analytic(executor_cost_params());
  c.overheads = fit_run_overheads(c, fit_runs, analytic, c.warnings);

  // Held out: predictions before calibration (analytic defaults, the profile alone) and after.
  const CalibratedCostModel calibrated(c, analytic);
  std::optional<Cluster> cluster;
  if (!in.cluster.empty()) cluster = for_option("--cluster", [&] { return load_cluster(in.cluster); });
  else if (!runs.empty()) cluster = runs.front().scenario.cluster;
  if (cluster) c.analytic_gpu = cluster->gpu_at(0).name;
  for (const LayerProfile& e : test) {
    const LayerWork work = profiled_layer_work(e.kind, e.shape, e.micro_batch_size, e.seq_len, in.profile);
    const Layer layer{e.kind, layer_kind_from_name(e.kind), std::nullopt};
    for (Phase phase : {Phase::Forward, Phase::BackwardInput, Phase::BackwardWeight}) {
      HeldOutPoint p;
      p.what = fmt::format("{} {} b={} s={}", e.kind, phase_name(phase), e.micro_batch_size, e.seq_len);
      p.measured_s = measured_seconds(e, phase);
      p.analytic_s = cluster ? analytic.phase_time(layer, work, phase, cluster->gpu_at(0), LinkSpec{}, 1) : kNaN;
      p.profiled_s = kNaN;
      const double t = calibrated.layer_seconds(layer, work, phase, 1);
      p.calibrated_s = t >= 0 ? t : kNaN;
      if (p.measured_s > 0) c.held_out_layers.push_back(p);
    }
  }
  for (size_t i = fit_runs.size(); i < runs.size(); ++i) {
    const RunRecord& r = runs[i];
    const ProfiledCostModel profiled(profile, r.scenario.model, analytic);
    HeldOutPoint p;
    p.what = r.path;
    p.measured_s = r.measured_step_s;
    p.analytic_s = simulated_step_s(r, analytic);
    p.profiled_s = simulated_step_s(r, profiled);
    p.calibrated_s = simulated_step_s(r, calibrated);
    c.held_out_runs.push_back(p);
  }

  c.fit_check = check_fit(c, shared_count);
  if (c.fit_check.poor()) {
    if (!in.accept_poor_fit)
      throw_bad_input("--runs: the fit is poor: {}; measure the runs again on a quiet machine, or pass --accept-poor-fit "
                      "to write it anyway",
                      poor_fit_text(c.fit_check));
    c.fit_check.accepted = true;
  }
  return c;
}

}  // namespace pw
