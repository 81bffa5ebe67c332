// Fused attention (FlashAttention) in the layer work: what it stores and what its backward recomputes.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/layer_work.hpp"

using namespace pw;

namespace {

// A GPT-3 175B block's micro-batch: s = 2048, b = 1, tp 8 with sequence parallelism.
Workload gpt3_block_workload() {
  Workload w;
  w.micro_batch_size = 1;
  w.seq_len = 2048;
  w.tp = 8;
  w.sequence_parallel = true;
  return w;
}

}  // namespace

TEST_CASE("fused attention stores no s x s scores, only a log-sum-exp per head and token") {
  // GPT-3 175B block, s = 2048, b = 1, t = 8 with sp. Korthikanti's selective-recompute bytes 34 s b h / t,
  // plus the fp32 log-sum-exp 4 a s b / t. Selective recomputation then rebuilds nothing.
  const Model m = model_preset("gpt3-175b");
  Workload w = gpt3_block_workload();
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
  Workload w = gpt3_block_workload();
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

TEST_CASE("fp8: a block's GEMMs run at the fp8 rate, inputs cast, the inputs W keeps at 1 byte") {
  const Model m = model_preset("gpt3-175b");
  Workload w = gpt3_block_workload();
  Workload w8 = w;
  w8.precision = Precision::Fp8;
  const LayerWork bf = layer_work(m, m.layers[1], w);
  const LayerWork f8 = layer_work(m, m.layers[1], w8);
  CHECK(f8.fp8);
  CHECK(f8.forward.gemm_flops == 0);
  CHECK(f8.forward.fp8_gemm_flops == bf.forward.gemm_flops);
  CHECK(f8.backward_weight.fp8_gemm_flops == bf.backward_weight.gemm_flops);
  CHECK(f8.forward.attention_flops == bf.forward.attention_flops);  // attention stays bf16
  // Casts in F: the QKV and up inputs (n h, gathered), the output-projection and down inputs (n h / t, n 4h / t),
  // 3 bytes an element.
  const double n = 2048, h = 12288, t = 8;
  CHECK(f8.forward.memory_bytes - bf.forward.memory_bytes == Approx(3 * (2 * n * h + n * h / t + n * 4 * h / t)));
  CHECK(f8.weight_grad_bytes == bf.weight_grad_bytes / 2);
  CHECK(f8.activation_bytes == bf.activation_bytes - bf.weight_grad_bytes / 2);
  // The head stays bf16.
  CHECK_FALSE(layer_work(m, m.layers.back(), w8).fp8);

  // The GEMM time at the fp8 peak: 2x the bf16 rate on H100, so half the time at the same efficiency.
  const AnalyticCostModel cost;
  const GpuSpec h100 = cluster_preset("dgx-h100").gpu;
  PhaseWork gemm;
  gemm.gemm_flops = 1e15;
  PhaseWork gemm8;
  gemm8.fp8_gemm_flops = 1e15;
  CHECK(cost.compute_time(gemm8, h100) == Approx(1e15 / (1979e12 * 0.70)));
  CHECK(cost.compute_time(gemm, h100) == Approx(1e15 / (989e12 * 0.70)));
}
