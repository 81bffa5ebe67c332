#include "core/serving_work.hpp"

#include <cmath>
#include <tuple>
#include <utility>

#include "core/error.hpp"

namespace pw {
namespace {

constexpr double kValueBytes = 2;   // bf16 activations

}  // namespace

double serving_weight_bytes(LayerKind kind, ServingWeights weights) {
  return kind == LayerKind::Block && weights == ServingWeights::Fp8 ? 1.0 : 2.0;
}

LayerParameters serving_layer_parameters(const TransformerConfig& t, const Layer& layer, int tp, int ep, int redundant) {
  if (ep <= 1) return layer_parameters(t, layer.kind, layer.block, tp, 1, tp);
  LayerParameters p = layer_parameters(t, layer.kind, layer.block, tp, ep, 1);
  if (redundant > 0 && p.routed > 0) p.routed *= static_cast<double>(t.moe->experts + redundant) / t.moe->experts;
  return p;
}

ServingBatch serving_batch(const ServingStep& step) {
  ServingBatch b;
  for (const SequenceChunk& c : step) {
    if (c.tokens == 1 && c.start > 0 && c.samples) {
      ++b.decode_tokens;
      b.decode_context += static_cast<double>(c.start + 1);
    } else {
      const double o = static_cast<double>(c.start), n = static_cast<double>(c.tokens);
      b.prefill_tokens += c.tokens;
      ++b.prefill_sequences;
      b.prefill_pairs += n * o + n * (n + 1) / 2;
      b.prefill_kv_reads += o + n;
    }
    if (c.verifies)
      b.sampled_tokens += c.tokens;  // each position's logits: the drafts checked and the next token
    else if (c.samples)
      ++b.sampled_tokens;
  }
  return b;
}

ServingBatch draft_batch(const ServingStep& step) {
  ServingBatch decodes;
  for (const SequenceChunk& c : step)
    if (c.verifies) {
      ++decodes.decode_tokens;
      decodes.decode_context += static_cast<double>(c.start + 1);
      ++decodes.sampled_tokens;
    }
  return decodes;
}

std::pair<ServingBatch, ServingBatch> split_in_two(const ServingBatch& b) {
  ServingBatch first, second;
  const auto halve = [](long n) { return std::pair<long, long>{n / 2, n - n / 2}; };
  std::tie(first.decode_tokens, second.decode_tokens) = halve(b.decode_tokens);
  std::tie(first.prefill_tokens, second.prefill_tokens) = halve(b.prefill_tokens);
  std::tie(first.sampled_tokens, second.sampled_tokens) = halve(b.sampled_tokens);
  // One prompt is cut in two chunks, each half a sequence of its own; more are dealt to the halves.
  if (b.prefill_sequences == 1 && b.prefill_tokens >= 2)
    first.prefill_sequences = second.prefill_sequences = 1;
  else
    std::tie(first.prefill_sequences, second.prefill_sequences) = halve(b.prefill_sequences);
  // Contexts, pairs and reads go with the tokens: their sums are the batch's.
  const auto share = [](double whole, long part, long all) { return all > 0 ? whole * static_cast<double>(part) / static_cast<double>(all) : 0.0; };
  first.decode_context = share(b.decode_context, first.decode_tokens, b.decode_tokens);
  second.decode_context = b.decode_context - first.decode_context;
  first.prefill_pairs = share(b.prefill_pairs, first.prefill_tokens, b.prefill_tokens);
  second.prefill_pairs = b.prefill_pairs - first.prefill_pairs;
  first.prefill_kv_reads = share(b.prefill_kv_reads, first.prefill_tokens, b.prefill_tokens);
  second.prefill_kv_reads = b.prefill_kv_reads - first.prefill_kv_reads;
  return {first, second};
}

ServingLayerShape serving_layer_shape(const Model& model, const Layer& layer, int tp, KvCacheDtype kv_dtype,
                                      ServingWeights weights, int ep, int redundant) {
  if (!model.transformer || layer.kind == LayerKind::Explicit)
    throw_bad_input("model '{}': layer '{}' gives explicit costs, not shapes; serving needs a transformer", model.name,
                    layer.name);
  ServingLayerShape shape;
  shape.model = &model;
  shape.layer = &layer;
  shape.tp = tp;
  shape.kv_dtype = kv_dtype;
  shape.weights = weights;
  shape.ep = ep;
  shape.redundant = ep > 1 ? redundant : 0;
  const TransformerConfig& t = *model.transformer;
  if (layer.kind == LayerKind::Head) shape.parameters = serving_layer_parameters(t, layer, tp);
  if (layer.kind == LayerKind::Block) {
    shape.parameters = serving_layer_parameters(t, layer, tp, ep, shape.redundant);
    shape.kv_bytes_per_token = kv_bytes_per_token_per_layer(model, tp, kv_dtype);
  }
  return shape;
}

int serving_layer_kernels(const TransformerConfig& t, const Layer& layer) {
  switch (layer.kind) {
    case LayerKind::Embedding: return 1;
    case LayerKind::Head: return 5;
    case LayerKind::Block: {
      int n = 11;
      if (layer.block >= 0 && t.moe_block(layer.block)) n += kServingRoutedKernels;
      if (t.mla) n += 4;
      return n;
    }
    case LayerKind::Mtp:
    case LayerKind::Explicit: return 0;  // not served
  }
  return 0;
}

double routed_experts_reached(double tokens, int top_k, int experts) {
  return 1 - std::pow(1 - static_cast<double>(top_k) / experts, tokens);
}

ServingWork serving_layer_work(const ServingLayerShape& shape, const ServingBatch& batch, double expert_tokens) {
  const Model& model = *shape.model;
  const Layer& layer = *shape.layer;
  const int tp = shape.tp;
  const double bytes_per_weight = serving_weight_bytes(layer.kind, shape.weights);
  const TransformerConfig& t = *model.transformer;
  const double tokens = static_cast<double>(batch.tokens());
  ServingWork w;
  w.model = &model;
  w.tp = tp;
  w.gemm_tokens = layer.kind == LayerKind::Head ? static_cast<double>(batch.sampled_tokens) : tokens;
  w.weights = shape.weights;
  w.kv_dtype = shape.kv_dtype;
  w.prefill_tokens = batch.prefill_tokens;
  w.decode_tokens = batch.decode_tokens;
  w.decode_context = batch.decode_context;
  w.kernels = serving_layer_kernels(t, layer);
  switch (layer.kind) {
    case LayerKind::Embedding:
      // A lookup: the rows of the batch's tokens.
      w.weight_bytes = tokens * t.hidden * bytes_per_weight;
      w.elementwise_bytes = tokens * t.hidden * kValueBytes;
      if (tp > 1) w.collectives.push_back({CollectiveKind::AllReduce, tokens * t.hidden * kValueBytes});
      break;
    case LayerKind::Head: {
      // Logits for the sampled tokens only (vLLM computes the last position of each sequence).
      const LayerParameters& p = shape.parameters;
      w.weight_bytes = p.total() * bytes_per_weight;
      w.gemm_flops = 2 * p.total() * static_cast<double>(batch.sampled_tokens);
      w.elementwise_bytes = tokens * t.hidden * kValueBytes;
      break;
    }
    case LayerKind::Block: {
      const LayerParameters& p = shape.parameters;
      w.weight_bytes = p.dense * bytes_per_weight;
      w.gemm_flops = 2 * p.dense * tokens;
      if (p.routed > 0) {
        // Every expert slot on this rank (all of them split by tp, or (experts + redundant) / ep whole) sees
        // tokens x top_k / slots of the step's tokens on average (the batch's, or every engine's with ep; a
        // replicated expert's tokens shared among its copies); it is read when any token reaches it.
        const MoeConfig& m = *t.moe;
        const int slots = m.experts + shape.redundant;
        const double share = static_cast<double>(m.top_k) / slots;
        const double routed_tokens = shape.ep > 1 ? expert_tokens : tokens;
        w.routed_flops = 2 * p.routed * routed_tokens * share;
        w.routed_weight_bytes = p.routed * bytes_per_weight * routed_experts_reached(routed_tokens, m.top_k, slots);
        w.routed_tokens = routed_tokens;
        w.ep = shape.ep;
        w.gemm_flops += w.routed_flops;
        w.weight_bytes += w.routed_weight_bytes;
      }
      const double heads = static_cast<double>(t.heads) / tp;
      if (shape.weights == ServingWeights::Fp8) std::swap(w.gemm_flops, w.fp8_gemm_flops);
      const double pairs = batch.prefill_pairs + batch.decode_context;
      if (t.mla) {
        // Decoding with the up-projections absorbed: each head scores the latent and rope part and sums the latent.
        w.attention_flops = 2 * pairs * heads * (2.0 * t.mla->kv_lora_rank + t.mla->qk_rope_head_dim);
      } else {
        w.attention_flops = 2 * pairs * heads * 2.0 * t.head_dim;
      }
      w.attention_sequences = static_cast<double>(batch.sequences());
      w.kv_bytes = shape.kv_bytes_per_token * (batch.prefill_kv_reads + batch.decode_context + tokens);
      // Norms, residuals and the MLP's activation: the hidden state about eight times and the MLP's
      // intermediate about twice per token, each in bf16.
      w.elementwise_bytes = tokens * (8.0 * t.hidden + 2.0 * t.ffn / tp) * kValueBytes;
      if (tp > 1) {
        const double hidden_bytes = tokens * t.hidden * kValueBytes;
        w.collectives.push_back({CollectiveKind::AllReduce, hidden_bytes});
        w.collectives.push_back({CollectiveKind::AllReduce, hidden_bytes});
      }
      break;
    }
    case LayerKind::Mtp:
    case LayerKind::Explicit: break;  // not served
  }
  return w;
}

ServingWork serving_layer_work(const Model& model, const Layer& layer, int tp, const ServingBatch& batch,
                               KvCacheDtype kv_dtype, ServingWeights weights, const ServingExperts& experts) {
  return serving_layer_work(serving_layer_shape(model, layer, tp, kv_dtype, weights, experts.ep, experts.redundant), batch,
                            experts.tokens);
}

}  // namespace pw
