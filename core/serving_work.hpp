#pragma once
// The work of one layer in one forward iteration of a serving engine (continuous batching, as vLLM runs it):
// some sequences prefill a chunk of their prompt, others decode one token each, all in one batch. Per tp
// rank: the weights read once for the whole batch (decode is memory-bound on them), the GEMM FLOPs of every
// token, the attention core's FLOPs and the KV cache it reads and writes (core/kv_cache.hpp), the
// elementwise traffic, and the tp all-reduces (two per block, of every token's hidden state; vLLM runs
// without sequence parallelism). CostModel::serving_time prices it.
#include <utility>
#include <vector>

#include "core/kv_cache.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "core/serving_steps.hpp"

namespace pw {

// One iteration's batch, as the scheduler forms it.
struct ServingBatch {
  long prefill_tokens = 0;       // prompt tokens computed this iteration (all prefilling sequences)
  long prefill_sequences = 0;    // the sequences they belong to
  double prefill_pairs = 0;      // their causal query-key pairs (a chunk of c tokens after o cached: c o + c (c + 1) / 2)
  double prefill_kv_reads = 0;   // tokens of KV they read (a chunk: o + c)
  long decode_tokens = 0;        // sequences decoding one token each
  double decode_context = 0;     // their contexts' tokens together (each reads its whole cache, itself included)
  long sampled_tokens = 0;       // tokens whose logits the head computes (decodes and prompts that finish)

  long tokens() const { return prefill_tokens + decode_tokens; }
  long sequences() const { return prefill_sequences + decode_tokens; }
  friend bool operator==(const ServingBatch&, const ServingBatch&) = default;
};

// The weights an engine serves with: bf16, or vLLM's and SGLang's --quantization fp8 (per-tensor fp8 weights
// and dynamically quantized activations in the blocks' linear layers: 1 byte a weight, GEMMs at the fp8 rate;
// the embedding and the LM head stay bf16, vLLM's Fp8Config quantizing only LinearBase layers).
enum class ServingWeights { Bf16, Fp8 };

// Bytes a parameter of a layer of `kind` takes under `weights`.
double serving_weight_bytes(LayerKind kind, ServingWeights weights);

// The share of a mixture's experts that `tokens` tokens, each routed to `top_k` of `experts` as good as at random,
// reach on average: 1 - (1 - k / E)^T. A step reads the weights of those it reaches.
double routed_experts_reached(double tokens, int top_k, int experts);

// One layer's weights on a GPU of a serving engine of tp GPUs whose routed experts spread over `ep` of them.
// ep 1: each expert split over tp as the dense matrices are (vLLM's FusedMoE shards every expert's inner
// dimension over tp without --enable-expert-parallel); ep > 1: ep / experts of them whole on each GPU.
// `redundant` more expert slots (EPLB's replicas, ep > 1 only) spread over the ep GPUs with the experts: (experts +
// redundant) / ep of them on each.
LayerParameters serving_layer_parameters(const TransformerConfig& t, const Layer& layer, int tp, int ep = 1,
                                         int redundant = 0);

// Kernels a layer runs in one forward step, its tp all-reduces apart (vLLM's model code counted: a dense block
// 11: norm, QKV GEMM, rotary, cache write, attention, output GEMM, norm, gate-up GEMM, activation, down GEMM and
// the residual add; routed experts kServingRoutedKernels more; latent attention 4 more; the embedding 1; the head 5:
// norm, LM head, sampler). The same count prices an eager step's launches on the host.
inline constexpr int kServingRoutedKernels = 7;  // router GEMM, top-k, alignment, two grouped GEMMs, activation, combine
int serving_layer_kernels(const TransformerConfig& t, const Layer& layer);

// The batch one step is. A one-token chunk after cached positions that samples counts as a decode (a prompt's
// last one-token chunk does the same work as one); a speculative decode's verification is a chunk of its positions
// after the cached ones, each of them sampled.
ServingBatch serving_batch(const ServingStep& step);

// The decodes a step verifies (speculative decoding), as the batch the draft runs at: one token each over its
// context (the draft keeps a cache of its own as long). Empty without verifications.
ServingBatch draft_batch(const ServingStep& step);

// A batch as two micro-batches of about half its tokens each (SGLang's two-batch overlap: the decodes dealt half
// and half, one prompt cut in two chunks, several dealt to either half); every count, context and pair of the two
// sums to the batch's.
std::pair<ServingBatch, ServingBatch> split_in_two(const ServingBatch& b);

struct ServingWork {
  double weight_bytes = 0;     // read once per iteration
  double gemm_flops = 0;
  double fp8_gemm_flops = 0;   // GEMMs at the fp8 rate (--quantization fp8)
  double attention_flops = 0;
  double kv_bytes = 0;         // KV cache read and written
  double attention_sequences = 0;  // the sequences each attention call walks (a per-sequence cost on small ones)
  double elementwise_bytes = 0;
  std::vector<Collective> collectives;  // tp
  // Kernels the layer runs in the step apart from its tp all-reduces (serving_layer_kernels): each costs the GPU a
  // fixed time beyond its work, as in training (AnalyticCostModel's kernel_overhead_s).
  double kernels = 0;

  // What a cost model priced by shape (kernels/) looks up: the model and the layer's tp degree (its dense GEMMs'
  // shapes are the model's), the tokens the dense GEMMs run (the head: the sampled ones), the weights' and the
  // KV cache's widths, and the step's decodes alone (their attention is a decode kernel's when no prefill shares
  // the step).
  const Model* model = nullptr;
  int tp = 1;
  double gemm_tokens = 0;
  ServingWeights weights = ServingWeights::Bf16;
  KvCacheDtype kv_dtype = KvCacheDtype::Bf16;
  long prefill_tokens = 0;
  long decode_tokens = 0;
  double decode_context = 0;  // the decodes' contexts together, tokens
  // A block's routed experts: their part of gemm_flops (fp8_gemm_flops with fp8 weights) and of weight_bytes, the
  // tokens that reach this GPU's experts (the batch's, or every engine's with ep > 1) and the GPUs the experts
  // spread over whole (1: each split over the tp ranks), which a table of MoE layers is looked up by.
  double routed_flops = 0, routed_weight_bytes = 0, routed_tokens = 0;
  int ep = 1;
};

// Expert parallelism over data-parallel attention engines (serving/dp_attention_serving.hpp): the routed experts
// whole, experts / ep on each of `ep` GPUs, which receive the copies of every engine's tokens of the step.
struct ServingExperts {
  int ep = 1;         // 1: the experts split over the engine's tp, its own tokens only
  double tokens = 0;  // every engine's batch this step
  int redundant = 0;  // expert slots beyond the experts (ServingConfig::redundant_experts)
};

// What a layer's work on one tp rank takes from the engine, whatever the batch: its parameters there and the KV
// bytes a token keeps. An engine makes it once per layer run (making it every step was a fifth of `serve plan`).
// BadInput for explicit layers (no shapes).
struct ServingLayerShape {
  const Model* model = nullptr;
  const Layer* layer = nullptr;
  int tp = 1;
  KvCacheDtype kv_dtype = KvCacheDtype::Bf16;
  ServingWeights weights = ServingWeights::Bf16;
  int ep = 1;         // ServingExperts::ep
  int redundant = 0;  // ServingExperts::redundant
  LayerParameters parameters;
  double kv_bytes_per_token = 0;  // blocks
};
ServingLayerShape serving_layer_shape(const Model& model, const Layer& layer, int tp,
                                      KvCacheDtype kv_dtype = KvCacheDtype::Bf16,
                                      ServingWeights weights = ServingWeights::Bf16, int ep = 1, int redundant = 0);

// The layer's work on one tp rank for a batch; `expert_tokens`: ServingExperts::tokens where the shape's ep > 1.
ServingWork serving_layer_work(const ServingLayerShape& shape, const ServingBatch& batch, double expert_tokens = 0);
// The same, the shape made for this call.
ServingWork serving_layer_work(const Model& model, const Layer& layer, int tp, const ServingBatch& batch,
                               KvCacheDtype kv_dtype = KvCacheDtype::Bf16, ServingWeights weights = ServingWeights::Bf16,
                               const ServingExperts& experts = {});

}  // namespace pw
