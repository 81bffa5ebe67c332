// `pipewright serve simulate`: a model served with tp x pp on a cluster under a workload (sim/serving_sim.hpp):
// throughput, time to first token and per output token, the KV cache.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/units.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/work_estimate.hpp"
#include "sim/serving_metrics.hpp"
#include "sim/serving_workload.hpp"

namespace pw {
namespace {

// Requests a run takes at most: each output token is one batch slot, simulated in microseconds.
constexpr long kMaxRequests = 100000;
constexpr double kMaxOutputTokens = 5e7;

struct ServeOptions {
  std::string model, cluster;
  int tp = 1, pp = 1;
  std::string prompt_tokens = "512", output_tokens = "128";
  long requests = 256;
  std::optional<int> concurrency;
  std::optional<double> rate;
  std::string trace;
  int max_num_seqs = 256;
  long max_num_batched_tokens = 8192;
  bool no_chunked_prefill = false;
  std::string kv_cache_dtype = "auto";
  double gpu_memory_utilization = 0.9;
  std::uint64_t seed = 1;
  bool json = false;
  CLI::App* requests_option_app = nullptr;
  CLI::Option* requests_option = nullptr;
};

double expected_length(const LengthSpec& s) { return s.kind == LengthSpec::Kind::Uniform ? (s.a + s.b) / 2 : s.a; }

std::string workload_text(const ServeOptions& o, const std::vector<ServingRequest>& requests) {
  if (!o.trace.empty()) return fmt::format("{} requests from {}", requests.size(), o.trace);
  const std::string arrivals = o.concurrency ? fmt::format("{} at a time", *o.concurrency)
                               : o.rate     ? fmt::format("Poisson arrivals at {:g}/s", *o.rate)
                                            : std::string("all at once");
  return fmt::format("{} requests of {} prompt and {} output tokens, {}", requests.size(), o.prompt_tokens,
                     o.output_tokens, arrivals);
}

void run_serve_simulate(const ServeOptions& o, std::ostream& out) {
  if (o.model.empty()) throw_bad_input("--model: give a model preset, config.json or pipewright model JSON");
  if (o.cluster.empty()) throw_bad_input("--cluster: give a cluster preset or cluster JSON");
  if ((o.concurrency ? 1 : 0) + (o.rate ? 1 : 0) + (o.trace.empty() ? 0 : 1) > 1)
    throw_bad_input("--concurrency, --rate and --trace: give one way for requests to arrive");
  if (o.concurrency && *o.concurrency < 1) throw_bad_input("--concurrency: must be at least 1, got {}", *o.concurrency);
  if (o.rate && !(*o.rate > 0 && std::isfinite(*o.rate))) throw_bad_input("--rate: must be a positive number of requests per second, got {}", *o.rate);
  if (o.requests < 1 || o.requests > kMaxRequests)
    throw_bad_input("--requests: must be from 1 to {}, got {}", kMaxRequests, o.requests);
  if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1))
    throw_bad_input("--gpu-memory-utilization: must be in (0, 1], got {}", o.gpu_memory_utilization);
  if (o.kv_cache_dtype != "auto" && o.kv_cache_dtype != "fp8")
    throw_bad_input("--kv-cache-dtype: '{}' is not one; use auto (the model's bf16) or fp8", o.kv_cache_dtype);
  const Model model = load_for_option("--model", o.model, load_model);
  const Cluster cluster = load_for_option("--cluster", o.cluster, load_cluster);
  if (!model.transformer) throw_bad_input("--model: '{}' gives explicit per-layer costs; serving needs a transformer", model.name);
  if (model.transformer->heads % o.tp != 0)
    throw_bad_input("--tp: {} does not divide the {} attention heads of '{}'", o.tp, model.transformer->heads, model.name);
  if (o.pp < 1 || o.pp > model.transformer->layers)
    throw_bad_input("--pp: must be from 1 to the {} blocks of '{}', got {}", model.transformer->layers, model.name, o.pp);
  cluster.check_capacity(o.tp * o.pp);

  std::vector<ServingRequest> requests;
  if (!o.trace.empty()) {
    requests = requests_from_jsonl(read_text_file(o.trace, "--trace"), o.trace, kMaxRequests);
  } else {
    WorkloadSpec w;
    w.prompt = parse_length(o.prompt_tokens, "--prompt-tokens");
    w.output = parse_length(o.output_tokens, "--output-tokens");
    w.requests = o.requests;
    w.rate_per_s = o.rate.value_or(0);
    w.seed = o.seed;
    if (expected_length(w.output) * static_cast<double>(o.requests) > kMaxOutputTokens)
      throw_bad_input("--requests x --output-tokens: about {} output tokens to simulate; the limit is {}; use fewer requests "
                      "or shorter outputs",
                      with_commas(static_cast<std::int64_t>(expected_length(w.output) * static_cast<double>(o.requests))),
                      with_commas(static_cast<std::int64_t>(kMaxOutputTokens)));
    requests = make_requests(w);
  }

  ServingConfig c;
  c.tp = o.tp;
  c.pp = o.pp;
  c.max_num_seqs = o.max_num_seqs;
  c.max_num_batched_tokens = o.max_num_batched_tokens;
  c.chunked_prefill = !o.no_chunked_prefill;
  c.kv_dtype = o.kv_cache_dtype == "fp8" ? KvCacheDtype::Fp8 : KvCacheDtype::Bf16;
  c.gpu_memory_utilization = o.gpu_memory_utilization;
  c.concurrency = o.concurrency.value_or(0);
  const AnalyticCostModel cost;
  const ServingResult r = simulate_serving(model, cluster, cost, c, requests);
  const ServingMetrics m = serving_metrics(r);

  std::vector<double> busy;
  for (double b : r.stage_busy_s) busy.push_back(r.makespan_s > 0 ? b / r.makespan_s : 0);
  if (o.json) {
    const nlohmann::ordered_json j = {{"model", model.name},
                                      {"cluster", cluster.name},
                                      {"tp", o.tp},
                                      {"pp", o.pp},
                                      {"requests", requests.size()},
                                      {"output_tokens_per_s", m.output_tokens_per_s},
                                      {"requests_per_s", m.requests_per_s},
                                      {"ttft_p50_s", m.ttft_p50_s},
                                      {"ttft_p99_s", m.ttft_p99_s},
                                      {"tpot_p50_s", m.tpot_p50_s},
                                      {"tpot_p99_s", m.tpot_p99_s},
                                      {"makespan_s", r.makespan_s},
                                      {"kv_capacity_tokens", r.kv_capacity_tokens},
                                      {"peak_kv_use", r.peak_kv_use},
                                      {"preemptions", r.preemptions},
                                      {"batches", r.batches},
                                      {"stage_busy_fraction", busy}};
    out << j.dump(2) << "\n";
    return;
  }
  out << fmt::format("{} on {}: tp {}, pp {} ({} GPUs), {}\n", model.name, cluster.name, o.tp, o.pp, o.tp * o.pp,
                     workload_text(o, requests));
  out << fmt::format("KV cache {} tokens ({}), peak use {}; {} preemptions; {} batches\n\n",
                     with_commas(r.kv_capacity_tokens), o.kv_cache_dtype == "fp8" ? "fp8" : "bf16",
                     format_percent(r.peak_kv_use), r.preemptions, with_commas(r.batches));
  std::string stages;
  for (size_t s = 0; s < busy.size(); ++s) stages += (s ? ", " : "") + format_percent(busy[s]);
  out << fmt::format("  output tokens/s     {}\n", format_short(m.output_tokens_per_s));
  out << fmt::format("  requests/s          {:.2f}\n", m.requests_per_s);
  out << fmt::format("  TTFT p50 / p99      {} / {}\n", format_seconds(m.ttft_p50_s), format_seconds(m.ttft_p99_s));
  out << fmt::format("  TPOT p50 / p99      {} / {}\n", format_seconds(m.tpot_p50_s), format_seconds(m.tpot_p99_s));
  out << fmt::format("  stages busy         {} of the {} run\n", stages, format_seconds(r.makespan_s));
}

}  // namespace

CommandRunner add_serve_command(CLI::App& app) {
  auto* serve = app.add_subcommand("serve", "Serving with tp x pp: simulate a workload (plan to come)");
  serve->require_subcommand(1);
  auto* cmd = serve->add_subcommand("simulate", "Simulate serving a workload: throughput, TTFT, TPOT, KV cache");
  auto o = std::make_shared<ServeOptions>();
  cmd->add_option("--model", o->model, "Model preset, Hugging Face config.json or pipewright model JSON")->required();
  cmd->add_option("--cluster", o->cluster, "Cluster preset or cluster JSON")->required();
  cmd->add_option("--tp", o->tp, "Tensor-parallel degree")->capture_default_str();
  cmd->add_option("--pp", o->pp, "Pipeline-parallel degree")->capture_default_str();
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "Prompt length: N, uniform:MIN:MAX or normal:MEAN:STD")->capture_default_str();
  cmd->add_option("--output-tokens", o->output_tokens, "Output length, as --prompt-tokens")->capture_default_str();
  cmd->add_option("--requests", o->requests, "Requests to serve (not with --trace)")->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "Closed loop: this many requests in flight");
  cmd->add_option("--rate", o->rate, "Poisson arrivals, requests per second");
  cmd->add_option("--trace", o->trace, "JSONL of {\"prompt_tokens\", \"output_tokens\", \"arrival_s\"}");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Requests running at once (vLLM's)")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens in one batch (vLLM's)")->capture_default_str();
  cmd->add_flag("--no-chunked-prefill", o->no_chunked_prefill, "Prefill each prompt whole in one batch");
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "auto (bf16) or fp8")->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization, "Share of GPU memory vLLM takes")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the generated workload")->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON");
  return [o, cmd](std::ostream& out) {
    if (cmd->parsed()) run_serve_simulate(*o, out);
  };
}

}  // namespace pw
