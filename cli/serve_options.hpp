#pragma once
// The options `serve simulate` and `serve plan` share: the model and cluster, the workload (lengths and
// arrivals, serving/serving_workload.hpp) and the engine's settings (vLLM's names), checked before anything runs.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/cost_model_chain.hpp"
#include "core/cluster.hpp"
#include "core/model.hpp"
#include "serving/serving_sim.hpp"

namespace pw {

struct ServeOptions {
  std::string model, cluster;
  std::string prompt_tokens = "512", output_tokens = "128";
  long requests = 256;
  std::optional<int> concurrency;
  std::optional<double> rate;
  std::string trace;
  std::string lengths;  // --lengths: a file of (prompt, output) token counts replayed in order
  bool requests_given = false;  // --requests on the command line (with --lengths: else the file's count)
  std::optional<int> max_num_seqs;             // default: vLLM's for the cluster's GPU
  std::optional<long> max_num_batched_tokens;  // likewise
  bool no_chunked_prefill = false;
  bool chunked_prefill = false;       // --chunked-prefill: on for an engine whose default is off
  std::string engine_kind = "vllm";   // --engine: vllm, sglang or trtllm (serving/engine_profile.hpp)
  std::string engine_version;         // --engine-version: empty, the newest modelled
  bool enforce_eager = false;         // --enforce-eager: no CUDA graphs
  std::string kv_cache_dtype = "auto";
  std::string quantization = "none";  // or fp8
  std::optional<double> gpu_memory_utilization;  // default: the engine's
  std::uint64_t seed = 1;
  std::string bench_client = "pipewright";  // --bench-client: whose draws (serving/serving_workload.hpp)
  bool json = false;
  std::string kernels;  // --kernels: a folder of kernel tables (add_kernels_to)
  std::string attention_backend;  // --attention-backend: the engine's name for it (kernels/attention_backends.hpp)
  int speculative_tokens = 0;      // --speculative-tokens (ServingConfig::speculative_tokens)
  double acceptance_rate = 0;      // --acceptance-rate
  std::string speculative_method;  // --speculative-method: mtp or eagle
  bool two_batch_overlap = false;  // --two-batch-overlap (ServingConfig::two_batch_overlap)
  int redundant_experts = 0;       // --redundant-experts (ServingConfig::redundant_experts)
  std::string percentiles;  // --percentiles: latency percentiles beside 50 and 99 (add_percentiles_to)

  // `default_cluster`: --cluster is optional, this when absent (`serve run` on the CPU: its memory and links
  // are not a GPU's; the profile gives the link).
  void add_to(CLI::App& cmd, const char* default_cluster = nullptr);
  // BadInput for anything malformed, before the model is read.
  void check() const;
  // --kernels and --attention-backend, for the commands that predict (simulate, plan).
  void add_kernels_to(CLI::App& cmd);
  // --speculative-tokens, --acceptance-rate and --speculative-method, for the commands that predict.
  void add_speculative_to(CLI::App& cmd);
  // --two-batch-overlap and --redundant-experts, for the commands that predict data-parallel attention engines.
  void add_expert_parallel_to(CLI::App& cmd);
  // --percentiles, for serve simulate's report.
  void add_percentiles_to(CLI::App& cmd);
  // --percentiles, read (BadInput for a bad one); empty without it.
  std::vector<double> more_percentiles() const;
  // The analytic model, with --kernels' tables over it when given.
  CostModelChain cost_models() const;
  // After a prediction: the cost model and what the tables priced, as the training commands print them.
  void print_cost_model(std::ostream& out, const CostModelChain& chain) const;
  Model load_model_checked() const;
  Cluster load_cluster_checked() const;
  std::vector<ServingRequest> make_workload() const;
  // The same lengths arriving as Poisson arrivals at `rate` per second (0: all at once); not for --trace.
  std::vector<ServingRequest> make_workload_at(double rate) const;
  // The engine's defaults for tp x pp (EngineProfile) with the command line's settings over them.
  ServingConfig engine(int tp, int pp, const Model& model, const Cluster& cluster) const;
  // "512 requests of 1024 prompt and 256 output tokens, all at once"
  std::string workload_text(size_t requests) const;
};

}  // namespace pw
