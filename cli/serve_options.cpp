#include "cli/serve_options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "cli/scenario_options.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/work_estimate.hpp"
#include "kernels/attention_backends.hpp"
#include "kernels/installed_tables.hpp"
#include "serving/engine_profile.hpp"
#include "serving/serving_metrics.hpp"
#include "serving/serving_workload.hpp"

namespace pw {
namespace {

// Requests a run takes at most, and output tokens: each is one batch slot, simulated in microseconds.
constexpr long kMaxRequests = 100000;
constexpr double kMaxOutputTokens = 5e7;

double expected_length(const LengthSpec& s) { return s.kind == LengthSpec::Kind::Uniform ? (s.a + s.b) / 2 : s.a; }

}  // namespace

void ServeOptions::add_kernels_to(CLI::App& cmd) {
  add_kernels_option(cmd, kernels);
  cmd.add_option("--attention-backend", attention_backend,
                 "The engine's attention backend, by its name (sglang: fa3, flashinfer, triton, trtllm_mha; vllm: "
                 "FLASH_ATTN, FLASHINFER, TRITON_ATTN): attention priced from its kernels in --kernels, and the "
                 "export launches it");
}

void ServeOptions::add_speculative_to(CLI::App& cmd) {
  cmd.add_option("--speculative-tokens", speculative_tokens,
                 "Speculative decoding: tokens the draft proposes a decode step, verified together (pp 1)");
  cmd.add_option("--acceptance-rate", acceptance_rate,
                 "The chance each drafted token is accepted, given the ones before it (with --speculative-tokens)");
  cmd.add_option("--speculative-method", speculative_method,
                 "The draft: mtp (the model's own multi-token prediction module) or eagle (an EAGLE head; the export "
                 "reads it from $DRAFT_MODEL)");
}

void ServeOptions::add_expert_parallel_to(CLI::App& cmd) {
  cmd.add_flag("--two-batch-overlap", two_batch_overlap,
               "Data-parallel attention engines run each step as two halves, one's expert all-to-alls beside the "
               "other's compute (SGLang's --enable-two-batch-overlap)");
  cmd.add_option("--redundant-experts", redundant_experts,
                 "Data-parallel attention: this many more expert slots, replicas of experts, spread over the ep GPUs "
                 "with them (SGLang's --ep-num-redundant-experts; experts + redundant a multiple of ep)");
}

void ServeOptions::add_percentiles_to(CLI::App& cmd) {
  cmd.add_option("--percentiles", percentiles,
                 "Latency percentiles to report beside the median and p99, comma-separated (e.g. 90,95)");
}

std::vector<double> ServeOptions::more_percentiles() const {
  return percentiles.empty() ? std::vector<double>{} : percentiles_from_string(percentiles);
}

CostModelChain ServeOptions::cost_models() const {
  CostModelChain chain;
  chain.add_kernels(kernels.find("installed") != std::string::npos ? resolve_kernels_option(kernels, load_cluster_checked().gpu)
                                                                   : kernels,
                    attention_backend.empty() ? nullptr : &pw::attention_backend(engine_kind, attention_backend));
  return chain;
}

void ServeOptions::print_cost_model(std::ostream& out, const CostModelChain& chain) const {
  if (!chain.tables()) return;
  out << "\ncost model: " << chain.description() << "\n";
  for (const std::string& line : chain.table_lines()) out << "  " << line << "\n";
}

void ServeOptions::add_to(CLI::App& cmd, const char* default_cluster) {
  cmd.add_option("--model", model, "Model preset, Hugging Face config.json or pipewright model JSON")->required();
  auto* c = cmd.add_option("--cluster", cluster, "Cluster preset or cluster JSON");
  if (default_cluster) {
    cluster = default_cluster;
    c->capture_default_str();
  } else {
    c->required();
  }
  cmd.add_option("--prompt-tokens", prompt_tokens, "Prompt length: N, uniform:MIN:MAX or normal:MEAN:STD")->capture_default_str();
  cmd.add_option("--output-tokens", output_tokens, "Output length, as --prompt-tokens")->capture_default_str();
  cmd.add_option_function<long>("--requests", [this](const long& n) { requests = n, requests_given = true; },
                                "Requests to serve (not with --trace; default 256, or every line of --lengths)");
  cmd.add_option("--concurrency", concurrency, "Closed loop: this many requests in flight");
  cmd.add_option("--rate", rate, "Poisson arrivals, requests per second");
  cmd.add_option("--trace", trace, "JSONL of {\"prompt_tokens\", \"output_tokens\", \"arrival_s\"}");
  cmd.add_option("--lengths", lengths,
                 "JSONL of {\"prompt_tokens\", \"output_tokens\"} replayed in order (a ShareGPT-like set), arriving "
                 "as --rate or --concurrency say");
  cmd.add_option("--max-num-seqs", max_num_seqs, "Requests running at once (default: the engine's for the GPU)");
  cmd.add_option("--max-num-batched-tokens", max_num_batched_tokens, "Tokens in one batch (default: the engine's for the GPU)");
  cmd.add_option("--engine", engine_kind, "The engine whose scheduler and defaults to model: vllm, sglang or trtllm")
      ->capture_default_str();
  cmd.add_option("--engine-version", engine_version,
                 "Its version (vllm below 0.8: the V0 engine); default: the newest modelled");
  cmd.add_flag("--no-chunked-prefill", no_chunked_prefill, "Prefill each prompt whole in one batch");
  cmd.add_flag("--chunked-prefill", chunked_prefill, "Prefill prompts in chunks (for an engine whose default is off)");
  cmd.add_flag("--enforce-eager", enforce_eager, "No CUDA graphs: every kernel launched by the host each step");
  cmd.add_option("--kv-cache-dtype", kv_cache_dtype, "auto (bf16) or fp8")->capture_default_str();
  cmd.add_option("--quantization", quantization, "Weights: none (bf16) or fp8 (the blocks' linear layers)")
      ->capture_default_str();
  cmd.add_option("--gpu-memory-utilization", gpu_memory_utilization,
                 "The engine's memory share: vLLM's --gpu-memory-utilization (0.9), SGLang's --mem-fraction-static, "
                 "TensorRT-LLM's free_gpu_memory_fraction (default: the engine's)");
  cmd.add_option("--seed", seed, "Seed of the generated workload")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd.add_option("--bench-client", bench_client,
                 "Draw lengths and arrivals as this client does: pipewright, or sglang (sglang.bench_serving's random "
                 "dataset, numpy's generator seeded with --seed)")
      ->capture_default_str();
  cmd.add_flag("--json", json, "Print JSON");
}

void ServeOptions::check() const {
  more_percentiles();  // a bad --percentiles fails before anything runs
  if ((concurrency ? 1 : 0) + (rate ? 1 : 0) + (trace.empty() ? 0 : 1) > 1)
    throw_bad_input("--concurrency, --rate and --trace: give one way for requests to arrive");
  if (concurrency && *concurrency < 1) throw_bad_input("--concurrency: must be at least 1, got {}", *concurrency);
  if (rate && !(*rate > 0 && std::isfinite(*rate)))
    throw_bad_input("--rate: must be a positive number of requests per second, got {}", *rate);
  if (!lengths.empty() && !trace.empty())
    throw_bad_input("--lengths and --trace: a trace gives its own lengths and arrivals; give one of them");
  const BenchClient client = parse_bench_client(bench_client, "--bench-client");
  if (client != BenchClient::Pipewright && !trace.empty())
    throw_bad_input("--bench-client: a trace gives its own lengths and arrivals; leave it out with --trace");
  if (requests < 1 || requests > kMaxRequests) throw_bad_input("--requests: must be from 1 to {}, got {}", kMaxRequests, requests);
  if (gpu_memory_utilization && !(*gpu_memory_utilization > 0 && *gpu_memory_utilization <= 1))
    throw_bad_input("--gpu-memory-utilization: must be in (0, 1], got {}", *gpu_memory_utilization);
  if (chunked_prefill && no_chunked_prefill) throw_bad_input("--chunked-prefill and --no-chunked-prefill: give one of them");
  if (engine_kind != "vllm" && engine_kind != "sglang" && engine_kind != "trtllm")
    throw_bad_input("--engine: '{}' is not one; use vllm, sglang or trtllm", engine_kind);
  if (kv_cache_dtype != "auto" && kv_cache_dtype != "fp8")
    throw_bad_input("--kv-cache-dtype: '{}' is not one; use auto (the model's bf16) or fp8", kv_cache_dtype);
  if (quantization != "none" && quantization != "fp8")
    throw_bad_input("--quantization: '{}' is not one; use none (bf16 weights) or fp8", quantization);
  if (speculative_tokens != 0 || acceptance_rate != 0 || !speculative_method.empty()) {
    if (speculative_tokens < 1 || speculative_tokens > kMaxSpeculativeTokens)
      throw_bad_input("--speculative-tokens: must be from 1 to {}, got {}", kMaxSpeculativeTokens, speculative_tokens);
    if (!(acceptance_rate > 0 && acceptance_rate <= 1))
      throw_bad_input("--acceptance-rate: give the chance a drafted token is accepted, in (0, 1], got {}", acceptance_rate);
    if (speculative_method != "mtp" && speculative_method != "eagle")
      throw_bad_input("--speculative-method: '{}' is not one; use mtp (the model's own module) or eagle", speculative_method);
  }
  if (redundant_experts < 0 || redundant_experts > kMaxRedundantExperts)
    throw_bad_input("--redundant-experts: must be from 0 to {}, got {}", kMaxRedundantExperts, redundant_experts);
  if (two_batch_overlap && engine_kind != "sglang")
    throw_bad_input("--two-batch-overlap: SGLang's --enable-two-batch-overlap is what is modelled; add --engine sglang");
  if (redundant_experts > 0 && engine_kind != "sglang")
    throw_bad_input("--redundant-experts: SGLang's --ep-num-redundant-experts is what is modelled; add --engine sglang");
  if (!attention_backend.empty()) {
    pw::attention_backend(engine_kind, attention_backend);  // BadInput naming the engine's backends
    if (kernels.empty())
      throw_bad_input("--attention-backend: the analytic model prices every backend alike; give --kernels with the "
                      "engine's measured tables to price {}'s kernels",
                      attention_backend);
  }
  if (trace.empty() && lengths.empty()) {
    WorkloadSpec none;  // no requests: what the client cannot draw (normal lengths, a seed numpy refuses) fails now
    none.prompt = parse_length(prompt_tokens, "--prompt-tokens");
    none.seed = seed;
    none.client = client;
    none.output = parse_length(output_tokens, "--output-tokens", output_min(none.client));
    make_requests(none);
    const LengthSpec& out = none.output;
    const double tokens = expected_length(out) * static_cast<double>(requests);
    if (tokens > kMaxOutputTokens)
      throw_bad_input("--requests x --output-tokens: about {} output tokens to simulate; the limit is {}; use fewer requests "
                      "or shorter outputs",
                      with_commas(static_cast<std::int64_t>(tokens)), with_commas(static_cast<std::int64_t>(kMaxOutputTokens)));
  }
}

Model ServeOptions::load_model_checked() const {
  Model m = load_for_option("--model", model, load_model);
  if (!m.transformer) throw_bad_input("--model: '{}' gives explicit per-layer costs; serving needs a transformer", m.name);
  return m;
}

Cluster ServeOptions::load_cluster_checked() const { return load_for_option("--cluster", cluster, load_cluster); }

std::vector<ServingRequest> ServeOptions::make_workload() const {
  if (!trace.empty()) {
    std::vector<ServingRequest> r = requests_from_jsonl(read_text_file(trace, "--trace"), trace, kMaxRequests);
    double tokens = 0;
    for (const ServingRequest& q : r) tokens += static_cast<double>(q.output_tokens);
    if (tokens > kMaxOutputTokens)
      throw_bad_input("--trace: {} output tokens to simulate; the limit is {}; split the trace",
                      with_commas(static_cast<std::int64_t>(tokens)), with_commas(static_cast<std::int64_t>(kMaxOutputTokens)));
    return r;
  }
  return make_workload_at(rate.value_or(0));
}

std::vector<ServingRequest> ServeOptions::make_workload_at(double rate_per_s) const {
  if (!trace.empty()) throw_bad_input("--trace: a trace's requests arrive when it says; give lengths and a rate instead");
  WorkloadSpec w;
  w.requests = requests;
  w.client = parse_bench_client(bench_client, "--bench-client");
  if (!lengths.empty()) {
    w.lengths = lengths_from_jsonl(read_text_file(lengths, "--lengths"), lengths, kMaxRequests);
    // Past the file's end the lines are replayed again from the first.
    if (!requests_given) w.requests = static_cast<long>(w.lengths.size());
    double tokens = 0;
    for (long i = 0; i < w.requests; ++i) tokens += static_cast<double>(w.lengths[static_cast<size_t>(i) % w.lengths.size()].output_tokens);
    if (tokens > kMaxOutputTokens)
      throw_bad_input("--lengths: {} output tokens to simulate; the limit is {}; use fewer --requests",
                      with_commas(static_cast<std::int64_t>(tokens)), with_commas(static_cast<std::int64_t>(kMaxOutputTokens)));
  } else {
    w.prompt = parse_length(prompt_tokens, "--prompt-tokens");
    w.output = parse_length(output_tokens, "--output-tokens", output_min(w.client));
  }
  w.rate_per_s = rate_per_s;
  // The arrivals span about requests / rate seconds: bounded as a trace's arrival times are.
  if (rate_per_s > 0 && static_cast<double>(w.requests) / rate_per_s > kMaxArrivalSeconds)
    throw_bad_input("--rate: {:g} requests per second spreads {} requests over about {:g} s; the longest run taken is "
                    "1e+09 s (about 31 years), so give at least {:g} per second",
                    rate_per_s, w.requests, static_cast<double>(w.requests) / rate_per_s,
                    static_cast<double>(w.requests) / kMaxArrivalSeconds);
  w.seed = seed;
  return make_requests(w);
}

ServingConfig ServeOptions::engine(int tp, int pp, const Model& model, const Cluster& cluster) const {
  ServingConfig c;
  c.tp = tp;
  c.pp = pp;
  c.apply(engine_profile(engine_kind, engine_version, model, cluster.gpu_at(0), tp, pp));
  if (max_num_seqs) c.max_num_seqs = *max_num_seqs;
  if (max_num_batched_tokens) c.max_num_batched_tokens = *max_num_batched_tokens;
  if (no_chunked_prefill) c.chunked_prefill = false;
  if (chunked_prefill) c.chunked_prefill = true;
  c.eager = enforce_eager;
  c.attention_backend = attention_backend;
  c.speculative_tokens = speculative_tokens;
  c.acceptance_rate = speculative_tokens > 0 ? acceptance_rate : 1.0;
  c.speculative_method = speculative_method;
  c.two_batch_overlap = two_batch_overlap;
  c.redundant_experts = redundant_experts;
  if (speculative_method == "mtp" && (!model.transformer || model.transformer->mtp_layers == 0))
    throw_bad_input("--speculative-method mtp: model '{}' has no multi-token prediction module; use eagle", model.name);
  c.kv_dtype = kv_cache_dtype == "fp8" ? KvCacheDtype::Fp8 : KvCacheDtype::Bf16;
  c.weights = quantization == "fp8" ? ServingWeights::Fp8 : ServingWeights::Bf16;
  if (c.weights == ServingWeights::Fp8 && !(cluster.gpu_at(0).fp8_peak_flops > 0))
    throw_bad_input("--quantization fp8: {} has no fp8 tensor cores (the cluster gives no fp8 peak); serve in bf16 "
                    "(leave out --quantization) or on an H100 or later",
                    cluster.gpu_at(0).name);
  if (gpu_memory_utilization) c.gpu_memory_utilization = *gpu_memory_utilization;
  c.concurrency = concurrency.value_or(0);
  return c;
}

std::string ServeOptions::workload_text(size_t n) const {
  if (!trace.empty()) return fmt::format("{} requests from {}", n, trace);
  const std::string arrivals = concurrency ? fmt::format("{} at a time", *concurrency)
                               : rate     ? fmt::format("Poisson arrivals at {:g}/s", *rate)
                                          : std::string("all at once");
  const std::string drawn =
      bench_client == "pipewright" ? std::string() : fmt::format(", drawn as sglang.bench_serving draws them (seed {})", seed);
  if (!lengths.empty()) return fmt::format("{} requests of the lengths in {}, {}{}", n, lengths, arrivals, drawn);
  return fmt::format("{} requests of {} prompt and {} output tokens, {}{}", n, prompt_tokens, output_tokens, arrivals, drawn);
}

}  // namespace pw
