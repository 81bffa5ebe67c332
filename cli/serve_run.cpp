#include "cli/serve_run.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <string>

#include "cli/cost_model_chain.hpp"
#include "cli/work_bounds.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/kv_cache.hpp"
#include "core/units.hpp"
#include "core/work_estimate.hpp"
#include "executor/cpu_layers.hpp"
#include "executor/cpu_serving.hpp"
#include "profiler/cpu_serving_profile.hpp"
#include "profiler/profile.hpp"
#include "profiler/repeat.hpp"
#include "serving/serving_metrics.hpp"

namespace pw {
namespace {

// Batches of the workload timed for the prediction, per kind of layer.
constexpr int kProfiledBatches = 24;
constexpr int kMaxRepeat = 100;

// The float32 weights the run holds: the model once.
WorkEstimate weights_estimate(const Model& model) {
  double params = 0;
  for (const Layer& l : model.layers)
    if (l.kind != LayerKind::Mtp) params += layer_parameters(*model.transformer, l.kind, l.block, 1).total();
  WorkEstimate w;
  w.work = fmt::format("'{}' in float32 ({} parameters)", model.name, format_count(params));
  w.bytes = 4.0 * params;
  w.fix = "serve a smaller model (the cpu backend is for the tiny examples)";
  return w;
}

// A run waits for its requests in real time: --repeat runs of at least the last arrival each.
WorkEstimate wait_estimate(const std::vector<ServingRequest>& requests, int concurrency, int repeat) {
  double last = 0;
  if (concurrency == 0)
    for (const ServingRequest& r : requests) last = std::max(last, r.arrival_s);
  WorkEstimate w;
  w.work = fmt::format("--repeat {} runs that wait {} each for the last request to arrive", repeat, format_seconds(last));
  w.seconds = last * repeat;
  w.fix = "give a faster --rate, a shorter trace or a smaller --repeat";
  return w;
}

// The float32 keys and values the run's stages hold at once: every request admitted at its longest, over
// every layer (an upper bound: finished requests give theirs back).
WorkEstimate kv_estimate(const Model& model, const std::vector<ServingRequest>& requests, long max_running) {
  long longest = 0;
  for (const ServingRequest& r : requests) longest = std::max(longest, r.prompt_tokens + r.output_tokens);
  const TransformerConfig& t = *model.transformer;
  // The cpu backend keeps keys and values in float32: twice vLLM's bf16 cache (core/kv_cache.hpp).
  const double per_token = 2 * kv_bytes_for_tokens(model, {0, model.num_layers() - 1}, 1, 1, KvCacheDtype::Bf16);
  WorkEstimate w;
  w.work = fmt::format("a float32 KV cache of {} requests x {} tokens x {} layers", max_running, longest, t.layers);
  w.bytes = per_token * static_cast<double>(longest) * static_cast<double>(max_running);
  w.fix = "lower --max-num-seqs or the request lengths";
  return w;
}

// The measured runs of the same batches: each metric's median over them, and the spread of the throughput
// ((max - min) / median).
struct MeasuredRuns {
  ServingMetrics metrics;
  double makespan_s = 0;
  std::vector<double> stage_busy_s;
  double peak_kv_bytes = 0;
  double spread = 0;
};

MeasuredRuns summarise(const std::vector<CpuServingRun>& runs) {
  MeasuredRuns out;
  std::vector<ServingMetrics> metrics;
  for (const CpuServingRun& r : runs) metrics.push_back(serving_metrics(r.measured));
  auto over_runs = [&](auto value) {
    std::vector<double> v;
    for (size_t i = 0; i < runs.size(); ++i) v.push_back(value(i));
    return median_of(std::move(v));
  };
  for (double ServingMetrics::*field : {&ServingMetrics::output_tokens_per_s, &ServingMetrics::requests_per_s,
                                         &ServingMetrics::ttft_p50_s, &ServingMetrics::ttft_p99_s,
                                         &ServingMetrics::tpot_p50_s, &ServingMetrics::tpot_p99_s})
    out.metrics.*field = over_runs([&](size_t i) { return metrics[i].*field; });
  out.makespan_s = over_runs([&](size_t i) { return runs[i].measured.makespan_s; });
  for (size_t s = 0; s < runs.front().measured.stage_busy_s.size(); ++s)
    out.stage_busy_s.push_back(over_runs([&](size_t i) { return runs[i].measured.stage_busy_s[s]; }));
  double lo = metrics.front().output_tokens_per_s, hi = lo;
  for (const CpuServingRun& r : runs) out.peak_kv_bytes = std::max(out.peak_kv_bytes, r.peak_kv_bytes);
  for (const ServingMetrics& m : metrics) {
    lo = std::min(lo, m.output_tokens_per_s);
    hi = std::max(hi, m.output_tokens_per_s);
  }
  out.spread = out.metrics.output_tokens_per_s > 0 ? (hi - lo) / out.metrics.output_tokens_per_s : 0;
  return out;
}

double error_percent(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured * 100 : 0;
}

}  // namespace

void ServeRunOptions::add_to(CLI::App& cmd) {
  serve.add_to(cmd, "ideal");
  cmd.add_option("--pp", pp, "Pipeline stages, each a thread")->capture_default_str();
  cmd.add_option("--profile", profile, "Profile with serving rates (pipewright profile --serving); default: measure first");
  cmd.add_option("--repeat", repeat, "Measured runs (and profile turns between them); the medians are shown")->capture_default_str();
  add_allow_large_flag(cmd, allow_large);
}

void run_serve_run(const ServeRunOptions& o, std::ostream& out) {
  o.serve.check();
  if (o.repeat < 1 || o.repeat > kMaxRepeat) throw_bad_input("--repeat: must be from 1 to {}, got {}", kMaxRepeat, o.repeat);
  const Model model = o.serve.load_model_checked();
  check_cpu_model(model);
  const Cluster cluster = o.serve.load_cluster_checked();
  if (o.pp < 1 || o.pp > model.transformer->layers)
    throw_bad_input("--pp: must be from 1 to the {} blocks of '{}', got {}", model.transformer->layers, model.name, o.pp);
  std::vector<WorkEstimate> memory{weights_estimate(model)};
  if (o.profile.empty()) memory.push_back(cpu_serving_profile_estimate(model, o.pp - 1));
  check_work_unless_allowed("serve run", memory, o.allow_large);
  if (o.serve.quantization != "none")
    throw_bad_input("--quantization {}: the cpu backend computes in float32; leave it out", o.serve.quantization);
  const std::vector<ServingRequest> requests = o.serve.make_workload();
  ServingConfig c = o.serve.engine(1, o.pp, model, cluster);
  // The CPU backend runs each batch at its own size with no graph to pad to, and its profile's rates already
  // hold its host time per step.
  c.graph_batch_sizes.clear();
  c.host_s_per_sequence = 0;
  c.stages = split_layers(model, o.pp, {});
  c.record_steps = true;

  // The batches this workload brings, as the analytic model's simulation forms them: a closed loop's and a
  // burst's do not depend on the times; arrivals' may, and then the runs repeat on the prediction's own.
  const AnalyticCostModel analytic;
  const ServingResult shapes = simulate_serving(model, cluster, analytic, c, requests);
  check_work_unless_allowed("serve run",
                            {kv_estimate(model, requests, shapes.max_running), wait_estimate(requests, c.concurrency, o.repeat)},
                            o.allow_large);
  const auto run_on = [&](const std::vector<ServingStep>& steps) {
    return serve_on_cpu(model, c.stages, steps, requests, c.concurrency, o.serve.seed);
  };
  std::vector<CpuServingRun> runs;
  CostModelChain chain;
  if (!o.profile.empty()) {
    chain.add_profile_file(o.profile, model);
    if (!chain.profiled()->profile().serving)
      throw_bad_input("--profile: {} has no serving rates; make one with `pipewright profile --serving`, or leave "
                      "--profile out to measure here first",
                      o.profile);
  } else {
    // Profiled at the workload's own batches, in --repeat turns with a measured run after each: the machine's
    // speed drifts, and profile and runs then see the same drift.
    ServingProfileRequest request = quick_serving_request(sample_steps(shapes.steps, kProfiledBatches), c.pp - 1);
    request.options.rounds = o.repeat;
    double running_s = 0;  // the measured runs' share of the profile's wall time
    request.after_round = [&] {
      const auto begin = std::chrono::steady_clock::now();
      runs.push_back(run_on(shapes.steps));
      running_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    };
    const auto start = std::chrono::steady_clock::now();
    Profile profile = profile_cpu_for_serving(model, request);
    ProfileOrigin origin;
    origin.tool = profile.tool;
    origin.machine = machine_text(profile.machine);
    origin.measured_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - running_s;
    chain.add_profile(std::move(profile), model, std::move(origin));
  }
  const ServingResult predicted = simulate_serving(model, cluster, chain.model(), c, requests);
  if (predicted.steps != shapes.steps) runs.clear();
  while (static_cast<int>(runs.size()) < o.repeat) runs.push_back(run_on(predicted.steps));
  const MeasuredRuns measured = summarise(runs);
  const ServingMetrics p = serving_metrics(predicted);
  const ServingMetrics& m = measured.metrics;

  struct Row {
    const char* name;
    const char* key;
    double predicted, measured;
    bool seconds;
  };
  std::vector<Row> rows{{"output tokens/s", "output_tokens_per_s", p.output_tokens_per_s, m.output_tokens_per_s, false},
                        {"requests/s", "requests_per_s", p.requests_per_s, m.requests_per_s, false},
                        {"TTFT p50", "ttft_p50_s", p.ttft_p50_s, m.ttft_p50_s, true},
                        {"TTFT p99", "ttft_p99_s", p.ttft_p99_s, m.ttft_p99_s, true},
                        {"TPOT p50", "tpot_p50_s", p.tpot_p50_s, m.tpot_p50_s, true},
                        {"TPOT p99", "tpot_p99_s", p.tpot_p99_s, m.tpot_p99_s, true},
                        {"makespan", "makespan_s", predicted.makespan_s, measured.makespan_s, true}};
  if (o.serve.json) {
    nlohmann::ordered_json j = {{"model", model.name}, {"backend", "cpu"}, {"pp", o.pp}, {"requests", requests.size()},
                                {"batches", predicted.batches}, {"cost_model", chain.description()}};
    for (const Row& r : rows)
      j[r.key] = {{"predicted", r.predicted}, {"measured", r.measured}, {"error_percent", error_percent(r.predicted, r.measured)}};
    j["stage_busy_s"] = {{"predicted", predicted.stage_busy_s}, {"measured", measured.stage_busy_s}};
    j["peak_kv_bytes"] = measured.peak_kv_bytes;
    j["runs"] = runs.size();
    j["throughput_spread"] = measured.spread;
    out << j.dump(2) << "\n";
    return;
  }
  out << fmt::format("{} served for real on the cpu backend: pp {} (a thread per stage), {}\n", model.name, o.pp,
                     o.serve.workload_text(requests.size()));
  out << fmt::format("predicted by {}\n", chain.description());
  out << fmt::format("{} batches, at most {} requests running; KV cache peak {} (float32, the largest stage)\n",
                     with_commas(predicted.batches), predicted.max_running, format_bytes(measured.peak_kv_bytes));
  out << fmt::format("measured: the median of {} runs (throughput spread {})\n\n", runs.size(),
                     format_percent(measured.spread));
  out << fmt::format("  {:<18} {:>12} {:>12} {:>9}\n", "", "predicted", "measured", "error %");
  for (const Row& r : rows) {
    auto text = [&](double v) { return r.seconds ? format_seconds(v) : format_short(v); };
    out << fmt::format("  {:<18} {:>12} {:>12} {:>+9.1f}\n", r.name, text(r.predicted), text(r.measured),
                       error_percent(r.predicted, r.measured));
  }
  for (int s = 0; s < o.pp; ++s) {
    const size_t i = static_cast<size_t>(s);
    out << fmt::format("  {:<18} {:>12} {:>12} {:>+9.1f}\n", fmt::format("stage {} busy", s),
                       format_seconds(predicted.stage_busy_s[i]), format_seconds(measured.stage_busy_s[i]),
                       error_percent(predicted.stage_busy_s[i], measured.stage_busy_s[i]));
  }
}

}  // namespace pw
