#pragma once
// Synthetic measurements from known cost parameters with deterministic noise: profiles, and run JSON and
// trace files written as `pipewright run --json` and `--trace` write them, for the calibration tests.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibrate/calibrated_cost_model.hpp"
#include "calibrate/layer_fit.hpp"
#include "core/analytic_cost_model.hpp"
#include "executor/cpu_tensor.hpp"
#include "planner/plan_file.hpp"
#include "profiler/profile.hpp"
#include "sim/chrome_trace.hpp"

namespace synth {

// Noise in [-1, 1) that is the same on every machine (the executor's splitmix64 stream).
struct Noise {
  explicit Noise(std::uint64_t seed) : rng(seed) {}
  double next() { return rng.uniform() * 2 - 1; }
  double factor(double amplitude) { return 1 + amplitude * next(); }
  pw::Rng rng;
};

// The truth: every kind and phase costs overhead + flops x s_per_flop + bytes x s_per_byte, times the
// phase's factor (B and W cost more per FLOP than F, as on real hardware).
struct Truth {
  double overhead_s = 20e-6;
  double s_per_flop = 2e-10;  // 5 GFLOP/s
  double s_per_byte = 2e-9;   // 500 MB/s: memory-bound work is a third of a block's time, as on a CPU
  double phase_factor[3] = {1.0, 1.3, 1.1};
  double link_latency_s = 30e-6;
  double link_bandwidth = 4e9;
  double optimizer_s_per_parameter = 2e-9;
};

inline pw::LayerFit truth_fit(const Truth& t, const std::string& kind, pw::Phase phase) {
  pw::LayerFit f;
  f.kind = kind;
  f.phase = phase;
  const double k = t.phase_factor[static_cast<int>(phase)];
  f.overhead_s = t.overhead_s * k;
  f.s_per_flop = t.s_per_flop * k;
  f.s_per_byte = t.s_per_byte * k;
  return f;
}

// The truth as a calibration (no measured entries: every layer from the formula), with run overheads.
inline pw::Calibration truth_calibration(const Truth& t, const pw::RunOverheads& overheads) {
  pw::Calibration c;
  c.machine = {"cpu", "synthetic", 8, 1};
  for (const char* kind : {"embedding", "block", "head"})
    for (pw::Phase p : {pw::Phase::Forward, pw::Phase::BackwardInput, pw::Phase::BackwardWeight})
      c.layers.push_back(truth_fit(t, kind, p));
  pw::LinkFit link;
  link.latency_s = t.link_latency_s;
  link.bandwidth_bytes_per_s = t.link_bandwidth;
  c.link = link;
  c.optimizer_s_per_parameter = t.optimizer_s_per_parameter;
  c.overheads = overheads;
  return c;
}

inline pw::PhaseTiming timing(double s) { return pw::PhaseTiming{s, s * 0.98, s * 1.02, 10}; }

// The embedding, a block and the head of `model` at each micro-batch size and sequence length, each time
// times (1 +- noise).
inline pw::Profile profile(const pw::Model& model, const std::vector<int>& sizes, const std::vector<int>& seqs,
                           const Truth& t, double noise, std::uint64_t seed) {
  Noise rng{seed};
  pw::Profile p;
  p.tool = "synthetic";
  p.machine = {"cpu", "synthetic", 8, 1};
  for (int s : seqs)
    for (int b : sizes)
      for (pw::LayerKind kind : {pw::LayerKind::Embedding, pw::LayerKind::Block, pw::LayerKind::Head}) {
        pw::LayerProfile e;
        e.kind = pw::layer_kind_name(kind);
        e.shape = pw::layer_shape(*model.transformer, kind);
        e.micro_batch_size = b;
        e.seq_len = s;
        const pw::LayerWork w = pw::profiled_layer_work(e.kind, e.shape, b, s, "synthetic");
        e.forward = timing(truth_fit(t, e.kind, pw::Phase::Forward).predict(w.forward) * rng.factor(noise));
        e.backward_input = timing(truth_fit(t, e.kind, pw::Phase::BackwardInput).predict(w.backward_input) * rng.factor(noise));
        e.backward_weight = timing(truth_fit(t, e.kind, pw::Phase::BackwardWeight).predict(w.backward_weight) * rng.factor(noise));
        p.layers.push_back(e);
      }
  pw::LinkProfile link;
  for (double bytes = 1024; bytes <= 64.0 * 1024 * 1024; bytes *= 4)
    link.samples.push_back({bytes, (t.link_latency_s + bytes / t.link_bandwidth) * rng.factor(noise)});
  link.latency_s = t.link_latency_s;
  link.bandwidth_bytes_per_s = t.link_bandwidth;
  p.links.push_back(link);
  p.optimizer_s_per_parameter = t.optimizer_s_per_parameter;
  return p;
}

inline std::string write(const std::string& name, const std::string& text) {
  const std::string path = std::string(PIPEWRIGHT_TEST_TMP) + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

// A run of `scenario` "measured" as `truth` simulates it: step and per-rank busy times times (1 +- noise),
// written in the form of `pipewright run --json`.
inline std::string run_file(const std::string& name, const pw::Scenario& scenario, const pw::CostModel& truth, double noise,
                            std::uint64_t seed) {
  Noise rng{seed};
  const pw::Evaluation ev = pw::evaluate(scenario, truth);
  nlohmann::json ranks = nlohmann::json::array();
  for (const pw::RankStats& r : ev.sim.ranks) ranks.push_back({{"rank", r.rank}, {"busy_s", r.busy_s * rng.factor(noise)}});
  const nlohmann::json doc = {
      {"pipewright_version", "test"},
      {"model", ev.scenario.model.name},
      {"backend", "cpu"},
      {"compute", "real"},
      {"measured_step_time_s", ev.sim.step_time_s * rng.factor(noise)},
      {"ranks", ranks},
      {"scenario", nlohmann::json::parse(pw::plan_to_json_text(ev, pw::PlanExtras{"run", {}, {}, std::nullopt}))}};
  return write(name, doc.dump(2));
}

inline pw::Model tiny(const char* name) { return pw::load_model(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/" + name); }

inline pw::Scenario scenario(const pw::Model& model, const char* schedule, int pp, int vpp, int m, int b) {
  pw::Scenario s;
  s.model = model;
  s.cluster = pw::cluster_preset("dgx-h100");
  s.parallel.pp = pp;
  s.parallel.vpp = vpp;
  s.parallel.microbatches = m;
  s.workload.micro_batch_size = b;
  s.workload.seq_len = 32;
  s.schedule = schedule;
  return s;
}

inline pw::RunOverheads truth_overheads() {
  pw::RunOverheads o;
  o.fitted = true;
  o.compute_scale = 1.10;
  o.dispatch_s = 100e-6;
  o.transfer_s = 300e-6;
  return o;
}

struct Fixture {
  std::string profile;
  std::vector<std::string> runs;
};

// A profile of tiny-llama at b = 1, 2, 4, 8 (+-1% noise) and seven runs (+-0.2% noise) simulated with the
// truth, in files named after `test` (ctest runs the test cases as processes at once: each writes its own).
inline Fixture fixture(const std::string& test) {
  const pw::Model m = tiny("tiny-llama.json");
  const Truth t;
  Fixture f;
  f.profile = write(test + "-synthetic-profile.json", pw::profile_to_json_text(profile(m, {1, 2, 4, 8}, {32}, t, 0.01, 3)));
  const pw::AnalyticCostModel analytic;
  const pw::CalibratedCostModel truth(truth_calibration(t, truth_overheads()), analytic);
  const std::vector<pw::Scenario> scenarios = {
      scenario(m, "1f1b", 2, 1, 4, 1),        scenario(m, "gpipe", 2, 1, 8, 2), scenario(m, "1f1b", 4, 1, 8, 1),
      scenario(m, "zb-h1", 4, 1, 4, 2),       scenario(m, "interleaved", 2, 2, 4, 1),
      scenario(m, "1f1b", 4, 1, 8, 4),        scenario(m, "zb-h1", 2, 1, 8, 8)};
  for (size_t i = 0; i < scenarios.size(); ++i)
    f.runs.push_back(run_file(fmt::format("{}-synthetic-run{}.json", test, i + 1), scenarios[i], truth, 0.002, 100 + i));
  return f;
}

// The trace `pipewright run --trace` would write for the scenario run as `truth` simulates it.
inline std::string trace_file(const std::string& name, const pw::Scenario& scenario, const pw::CostModel& truth) {
  pw::ChromeTraceWriter writer;
  pw::evaluate(scenario, truth, &writer);
  return write(name, writer.trace().dump());
}

}  // namespace synth
