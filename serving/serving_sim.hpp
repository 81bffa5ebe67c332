#pragma once
// Serving a model with tensor and pipeline parallelism, as vLLM's engine runs it: continuous batching under a
// token budget and the KV cache's capacity, prompts prefilled in chunks alongside the running decodes, up to pp
// batches in flight (one per stage, vLLM's batch queue), each through the stages in order with its hidden
// states sent between them, and preemption (the request recomputed later) when the cache runs out.
//
// A batch's time on a stage is its layers' CostModel::serving_time (core/serving_work.hpp); batches keep their
// order on every stage, so a batch's path through the stages is known when it is formed. A request becomes
// schedulable again when the batch it rode leaves the last stage (its next token depends on it) and the sampled
// tokens are back on the first stage, over the link between the two (vLLM's engine forms batches there).
#include <functional>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/kv_cache.hpp"
#include "core/model.hpp"
#include "core/serving_steps.hpp"
#include "core/serving_work.hpp"
#include "core/stage_costs.hpp"
#include "serving/engine_profile.hpp"
#include "serving/gap_counts.hpp"

namespace pw {

// Bounds on what one simulation steps through (its time grows with them): the prompts' chunks and the output
// tokens together, and how far in the future a request may arrive (past 1e9 s, about 31 years, the doubles of
// a run's clock stop resolving its microseconds).
inline constexpr double kMaxServingSlots = 5e7;
inline constexpr double kMaxArrivalSeconds = 1e9;
// Drafted tokens a speculative decode checks at most (the engines' own speculative steps are a handful).
inline constexpr int kMaxSpeculativeTokens = 16;
// Redundant expert slots at most (EPLB's are a fraction of the experts: DeepSeek's 32 over 256).
inline constexpr int kMaxRedundantExperts = 4096;

struct ServingRequest {
  double arrival_s = 0;
  long prompt_tokens = 0;
  long output_tokens = 1;  // including the first, which the prefill produces
  // Disaggregated serving's decode pool: the prompt's KV cache and the first token arrive with the request
  // (a prefill pool computed them), so the engine only decodes, unless a preemption makes it recompute.
  bool prefilled = false;
  // Prefilled: when the client got that first token (the prefill pool's), the start of the gap to the second.
  double first_token_s = 0;

  friend bool operator==(const ServingRequest&, const ServingRequest&) = default;
};

struct ServingConfig {
  int tp = 1;
  int pp = 1;
  // Routed experts whole over this many GPUs (data-parallel attention engines, serving/dp_attention_serving.hpp);
  // 1: each expert split over tp.
  int ep = 1;
  std::vector<LayerRange> stages;  // empty: transformer blocks spread evenly (embedding first, head last)
  int max_num_seqs = 256;           // requests running at once (vllm_serve_defaults for vLLM's)
  long max_num_batched_tokens = 8192;  // tokens in one batch
  bool chunked_prefill = true;      // false: a prompt is prefilled whole in one batch
  double gpu_memory_utilization = 0.9;  // of each GPU's memory, for weights, activations and the KV cache
  KvCacheDtype kv_dtype = KvCacheDtype::Bf16;
  ServingWeights weights = ServingWeights::Bf16;  // --quantization fp8
  int block_tokens = 16;            // the KV cache's page
  // Per stage, bytes kept back for activations and the runtime beyond the weights (CUDA graphs, sampler).
  double activation_reserve_bytes = 2e9;
  bool record_spans = false;  // fill ServingResult::spans
  bool record_steps = false;  // fill ServingResult::steps
  // A closed loop: this many requests from time 0, each next one as soon as one finishes (the requests'
  // arrival times unused). 0: the requests arrive when they say.
  int concurrency = 0;
  // The engine's policies (serving/engine_profile.hpp; these defaults are vLLM V1's scheduler without its
  // host time and CUDA-graph padding): the output admission reserves ahead, who gives pages back, whether a
  // step prefills or decodes, and the KV cache's share of the memory the weights leave (TensorRT-LLM).
  std::string engine_name = "vLLM V1";
  std::string engine_version;  // the profile's (EngineProfile::version)
  long reserved_output_tokens = 0;
  ServingRetract retract = ServingRetract::LatestAdmitted;
  bool prefill_first = false;
  bool kv_share_of_free = false;
  // Decode-only steps priced at the next captured batch size (when pad_to_graph); eager: every step's kernels
  // pay launch_s each on the host, none replayed from a CUDA graph (--enforce-eager).
  std::vector<int> graph_batch_sizes;
  bool pad_to_graph = false;
  bool eager = false;
  bool eager_prefill = false;  // steps with prefills run eagerly (EngineProfile::eager_prefill)
  double launch_s = kEagerLaunchSeconds;
  double host_s_per_sequence = 0;  // host time each step exposes per sequence it carries
  // The attention backend the prediction priced (the engine's name, --attention-backend; empty: the engine's
  // default), for the exports to launch the same.
  std::string attention_backend;
  // Read by data-parallel attention engines only (serving/dp_attention_serving.hpp; the others run without): SGLang's two-batch overlap
  // (--enable-two-batch-overlap), each step's batch run as two halves, one's all-to-alls beside the other's compute;
  // and redundant experts (--ep-num-redundant-experts, EPLB's replicas): experts + redundant_experts slots spread
  // whole over the ep GPUs, the tokens of an expert shared among its copies.
  bool two_batch_overlap = false;
  int redundant_experts = 0;
  // Speculative decoding (--speculative-tokens K, pp 1): a draft proposes K tokens a decode in K steps of one
  // block of the model's last block's shape and the LM head (the model's MTP module, or an EAGLE head), at the
  // decodes' tokens, and the model verifies them in one step of K + 1 positions a decode. Each drafted token is
  // accepted with `acceptance_rate` given the ones before it, so a step gives (1 - a^(K+1)) / (1 - a) tokens a
  // decode on average: the j-th step of a request floor((j + 1) E) - floor(j E) of them, the same every run.
  // 0: a token a decode. `speculative_method` ("mtp" or "eagle") is for the exports.
  int speculative_tokens = 0;
  double acceptance_rate = 1;
  std::string speculative_method;

  // The profile's defaults (limits, policies, page, memory share) over these.
  void apply(const EngineProfile& p);
};

// An engine's configuration for tp x pp (its defaults depend on them: SGLang's memory and CUDA graphs), with
// no stages given (spread evenly), for planners trying many shapes.
using ServingEngineFor = std::function<ServingConfig(int tp, int pp)>;
// `c` at any tp and pp, its other settings as they are.
ServingEngineFor same_engine(const ServingConfig& c);

struct ServedRequest {
  double arrival_s = 0;
  double first_token_s = 0;
  double last_token_s = 0;
  long prompt_tokens = 0;
  long output_tokens = 0;
  int preemptions = 0;
};

struct ServingResult {
  std::vector<ServedRequest> requests;  // in the order given
  double makespan_s = 0;                // the last token's time
  long kv_capacity_tokens = 0;          // the smallest stage's, per request set (all stages hold every token)
  double peak_kv_use = 0;               // the largest fraction of the cache in use
  long batches = 0;
  long max_running = 0;                 // the most requests admitted at once
  std::vector<double> stage_busy_s;     // per stage
  // Each batch on each stage: [start, end) seconds, for a timeline.
  struct Span {
    int stage = 0;
    long batch = 0;
    double start_s = 0, end_s = 0;
    long tokens = 0;
  };
  std::vector<Span> spans;
  std::vector<ServingStep> steps;  // every batch in launch order, what the executor runs
  long preemptions = 0;
  // Inter-token latency: every gap between two consecutive tokens of a request, as seconds and how many gaps
  // had it (a step's decodes share a few values, so it stays about as large as the batches); settled when a run
  // or a merge of runs ends.
  GapCounts token_gaps;
};

// `vllm serve`'s scheduler limits for a GPU (vllm/engine/arg_utils.py, EngineArgs._set_default_args, at
// vLLM 99d7eb5d): on GPUs of at least 70 GiB other than the A100, 1024 sequences and 8192 batched tokens;
// otherwise 256 and 2048.
struct SchedulerLimits {
  int max_num_seqs = 256;
  long max_num_batched_tokens = 2048;
};
SchedulerLimits vllm_serve_defaults(const GpuSpec& gpu);

// Tokens a speculative decode step gives on average: (1 - a^(K+1)) / (1 - a), K + 1 at a = 1.
double speculative_tokens_per_step(int drafted, double acceptance_rate);
// The tokens the j-th speculative step of a request gives (j from 0): floor((j + 1) E) - floor(j E).
long speculative_tokens_at_step(long step, int drafted, double acceptance_rate);

// BadInput when the weights leave no room for a KV cache, or a single request's tokens cannot fit it.
ServingResult simulate_serving(const Model& model, const Cluster& cluster, const CostModel& cost,
                               const ServingConfig& config, const std::vector<ServingRequest>& requests);

// A stage's layers as runs of one shape (the MTP module left out: not served), each run's shape made once: an
// engine keeps one per stage for all its steps.
struct ServingStageRuns {
  std::vector<std::pair<ServingLayerShape, int>> runs;  // shape, layers in the run
};
ServingStageRuns serving_stage_runs(const Model& model, const LayerRange& layers, int tp, KvCacheDtype kv_dtype,
                                    ServingWeights weights = ServingWeights::Bf16);

// One stage's time for a batch.
double serving_stage_time(const ServingStageRuns& stage, const ServingBatch& batch, const GpuSpec& gpu,
                          const LinkSpec& tp_link, const CostModel& cost);
double serving_stage_time(const Model& model, const LayerRange& layers, int tp, const ServingBatch& batch,
                          const GpuSpec& gpu, const LinkSpec& tp_link, const CostModel& cost, KvCacheDtype kv_dtype,
                          ServingWeights weights = ServingWeights::Bf16);

}  // namespace pw
