#pragma once
// Tiny models and the single-rank sequential reference the executor tests compare against.
#include <algorithm>
#include <string>
#include <vector>

#include "core/model.hpp"
#include "executor/cpu_model.hpp"
#include "schedules/generators.hpp"

namespace pw::test {

// Llama style: RMSNorm, SwiGLU, grouped-query attention (4 heads, 2 KV heads), rotary positions, no biases.
inline Model tiny_llama(int layers = 3) {
  TransformerConfig c;
  c.family = "llama";
  c.hidden = 16;
  c.layers = layers;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 4;
  c.ffn = 24;
  c.vocab = 32;
  c.max_seq_len = 8;
  c.mlp = MlpKind::SwiGlu;
  c.norm = NormKind::RmsNorm;
  return make_transformer_model("test-llama", c);
}

// GPT style: LayerNorm, GELU, multi-head attention, learned positions, biases everywhere.
inline Model tiny_gpt(int layers = 3) {
  TransformerConfig c;
  c.family = "gpt";
  c.hidden = 16;
  c.layers = layers;
  c.heads = 4;
  c.kv_heads = 4;
  c.head_dim = 4;
  c.ffn = 64;
  c.vocab = 32;
  c.max_seq_len = 8;
  c.mlp = MlpKind::Gelu;
  c.norm = NormKind::LayerNorm;
  c.learned_positions = true;
  c.bias = true;
  return make_transformer_model("test-gpt", c);
}

// Llama style with routed experts from block 1 on: 4 experts, top `top_k`, a shared expert behind a sigmoid gate
// (Qwen2-MoE's shape); `gpt`: GELU experts with biases (gpt-oss's) and no shared expert.
inline Model tiny_moe(int layers = 3, bool gpt = false, int top_k = 2) {
  TransformerConfig c = *(gpt ? tiny_gpt(layers) : tiny_llama(layers)).transformer;
  MoeConfig moe;
  moe.experts = 4;
  moe.top_k = top_k;
  moe.expert_ffn = 12;
  moe.first_dense = 1;
  if (gpt) {
    moe.expert_bias = true;
  } else {
    moe.shared_expert_ffn = 8;
    moe.shared_expert_gate = true;
  }
  c.moe = moe;
  return make_transformer_model(gpt ? "test-gpt-moe" : "test-llama-moe", c);
}

// |got - want| / |want| (Frobenius norms): how far a gradient or weight strays from the reference's.
inline double relative(const Mat& got, const Mat& want) {
  return (got - want).norm() / std::max(want.norm(), 1e-30f);
}

inline LayerRange whole(const CpuModel& m) { return LayerRange{0, m.num_layers() - 1}; }

// Mean loss over the micro-batches (F only).
inline double reference_loss(CpuModel& m, const std::vector<MicroBatch>& batches) {
  double loss = 0;
  for (const MicroBatch& mb : batches) {
    StageContext ctx;
    loss += m.forward(whole(m), Mat(), mb, ctx)(0, 0);
  }
  return loss / static_cast<double>(batches.size());
}

// One sequential iteration on one rank: each micro-batch's F then fused BW, gradients of the mean loss
// accumulated in the parameters. Returns the mean loss.
inline double reference_iteration(CpuModel& m, const std::vector<MicroBatch>& batches) {
  double loss = 0;
  const double scale = 1.0 / static_cast<double>(batches.size());
  for (const MicroBatch& mb : batches) {
    StageContext ctx;
    loss += m.forward(whole(m), Mat(), mb, ctx)(0, 0);
    m.backward_input(whole(m), Mat(), ctx, scale, /*defer_weights=*/false);
  }
  return loss * scale;
}

inline std::vector<MicroBatch> batches(const Model& model, int count, int iteration = 0, int batch = 2,
                                       std::uint64_t seed = 7) {
  std::vector<MicroBatch> out;
  for (int i = 0; i < count; ++i)
    out.push_back(synthetic_microbatch(seed, iteration, i, batch, model.transformer->max_seq_len,
                                       model.transformer->vocab));
  return out;
}

// A generated schedule of `p` ranks and `m` micro-batches, with 2 chunks per rank where the family takes them.
inline Schedule schedule_of(const std::string& name, int p, int m) {
  ScheduleSpec spec;
  spec.name = name;
  spec.ranks = p;
  spec.microbatches = m;
  spec.chunks = chunks_per_rank(name, 2);
  return make_schedule(spec);
}

}  // namespace pw::test
