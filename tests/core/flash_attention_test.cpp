// Fused attention (FlashAttention) in the layer work: what it stores and what its backward recomputes.
#include <catch2/catch.hpp>

#include "core/layer_work.hpp"

using namespace pw;

TEST_CASE("fused attention stores no s x s scores, only a log-sum-exp per head and token") {
  // GPT-3 175B block, s = 2048, b = 1, t = 8 with sp. Korthikanti's selective-recompute bytes 34 s b h / t,
  // plus the fp32 log-sum-exp 4 a s b / t. Selective recomputation then rebuilds nothing.
  const Model m = model_preset("gpt3-175b");
  Workload w;
  w.micro_batch_size = 1;
  w.seq_len = 2048;
  w.tp = 8;
  w.sequence_parallel = true;
  w.flash_attention = true;
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  for (Recompute r : {Recompute::None, Recompute::Selective}) {
    w.recompute = r;
    const LayerWork lw = layer_work(m, m.layers[1], w);
    CHECK(lw.activation_bytes == Approx(34 * s * b * h / t + 4 * a * s * b / t).epsilon(1e-12));
    CHECK(lw.recompute.flops() == 0);
  }
}

TEST_CASE("fused attention keeps the FLOPs of the attention core and recomputes QK^T in its backward") {
  // Forward attention core 4 b s^2 h / t; FlashAttention-2's backward: S = QK^T again, then dV, dP, dQ, dK,
  // five half-size products: 2.5 x the forward. Elementwise traffic of the s x s matrix disappears.
  const Model m = model_preset("gpt3-175b");
  Workload w;
  w.micro_batch_size = 1;
  w.seq_len = 2048;
  w.tp = 8;
  w.sequence_parallel = true;
  w.flash_attention = false;
  Workload wf = w;
  wf.flash_attention = true;
  const LayerWork eager = layer_work(m, m.layers[1], w);
  const LayerWork fused = layer_work(m, m.layers[1], wf);
  const double s = 2048, b = 1, h = 12288, t = 8;
  CHECK(fused.forward.attention_flops == Approx(4 * b * s * s * h / t).epsilon(1e-12));
  CHECK(eager.forward.attention_flops == fused.forward.attention_flops);
  CHECK(fused.backward_input.attention_flops == Approx(2.5 * 4 * b * s * s * h / t).epsilon(1e-12));
  CHECK(fused.forward.gemm_flops == eager.forward.gemm_flops);
  CHECK(fused.forward.memory_bytes < eager.forward.memory_bytes);
  CHECK(fused.backward_weight.gemm_flops == eager.backward_weight.gemm_flops);
}
