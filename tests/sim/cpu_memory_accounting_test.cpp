// The simulator's memory under MemoryAccounting::CpuFloat32: what the CPU backend keeps per layer, counted by
// hand for a model small enough to count, and a B that keeps more for W than F kept for it.
#include <catch2/catch.hpp>

#include "core/layer_work.hpp"
#include "core/analytic_cost_model.hpp"
#include "sim/scenario.hpp"
#include "../executor/executor_test_util.hpp"

using namespace pw;

namespace {

// The executor tests' Llama-style model: n = b s = 16 tokens, h 16, q = 4 x 4 = 16, kv = 2 x 4 = 8, f 24 (SwiGLU:
// up output 48), V 32, a 4.
Model counted_model() { return test::tiny_llama(2); }

Workload cpu_workload(Recompute recompute = Recompute::None) {
  Workload w;
  w.micro_batch_size = 2;
  w.seq_len = 8;
  w.recompute = recompute;
  w.memory = MemoryAccounting::CpuFloat32;
  return w;
}

}  // namespace

TEST_CASE("cpu float32 accounting: each layer's kept bytes by hand") {
  const Model model = counted_model();
  const Layer& embedding = model.layers.front();
  const Layer& block = model.layers[1];
  const Layer& head = model.layers.back();

  // Embedding: F keeps the 16 token ids (64 B); B keeps dy (16 x 16 floats) and the ids for W: 1024 + 64.
  LayerWork e = layer_work(model, embedding, cpu_workload());
  CHECK(e.activation_bytes == 64);
  CHECK(e.weight_grad_bytes == 1088);
  CHECK(e.output_bytes == 1024);

  // Block F: x-hat and norm output of both norms 4 x 256, 1/rms 2 x 16, Q K V O 16 x (16 + 8 + 8 + 16), up
  // output 16 x 48, SwiGLU output 16 x 24, softmax b a s^2 = 2 x 4 x 64: 1024 + 32 + 768 + 768 + 384 + 512 = 3488
  // floats.
  LayerWork none = layer_work(model, block, cpu_workload());
  CHECK(none.activation_bytes == 4 * 3488);
  // B keeps per weight op its input and output gradient: down (24 + 16), up (16 + 48), norm2 (16 + 16), out
  // (16 + 16), qkv (16 + 32), norm1 (16 + 16) = 248 floats a token.
  CHECK(none.weight_grad_bytes == 4 * 16 * 248);
  CHECK(none.output_bytes == 4 * 256);
  // Selective drops the softmax (512 floats); full keeps the block input alone (256 floats). W keeps the same.
  CHECK(layer_work(model, block, cpu_workload(Recompute::Selective)).activation_bytes == 4 * (3488 - 512));
  CHECK(layer_work(model, block, cpu_workload(Recompute::Full)).activation_bytes == 4 * 256);
  CHECK(layer_work(model, block, cpu_workload(Recompute::Full)).weight_grad_bytes == 4 * 16 * 248);

  // Head F: x-hat and norm output 2 x 256, 1/rms 16, probabilities 16 x 32, target ids 16: 4 x 1040 + 64.
  LayerWork hd = layer_work(model, head, cpu_workload());
  CHECK(hd.activation_bytes == 4 * 1040 + 64);
  // B: norm output + logit gradient (256 + 512), x-hat + norm gradient (256 + 256).
  CHECK(hd.weight_grad_bytes == 4 * 1280);
  CHECK(hd.output_bytes == 0);

  // The GPU accounting is untouched: bf16, and W's part within F's.
  Workload gpu = cpu_workload();
  gpu.memory = MemoryAccounting::GpuBf16;
  const LayerWork g = layer_work(model, block, gpu);
  CHECK(g.output_bytes == 2 * 256);
  CHECK(g.weight_grad_bytes <= g.activation_bytes);
}

TEST_CASE("cpu float32 accounting: a zero-bubble stage grows at B and frees at W") {
  // One rank holding the whole model (embedding + 2 blocks + head), zb-h1 with 3 micro-batches. Per micro-batch
  // F keeps A and B keeps K > A until W: F adds A, B adds K - A, W frees K.
  Scenario s;
  s.model = counted_model();
  s.cluster = load_cluster("ideal");
  s.parallel.pp = 1;
  s.parallel.microbatches = 3;
  s.workload = cpu_workload();
  s.schedule = "zb-h1";
  const Evaluation ev = evaluate(s, AnalyticCostModel());
  const double a = 64 + 2 * 4 * 3488 + (4 * 1040 + 64), k = 1088 + 2 * 4 * 16 * 248 + 4 * 1280;
  REQUIRE(ev.stages.size() == 1);
  CHECK(ev.stages[0].cost.activation_bytes == a);
  CHECK(ev.stages[0].cost.weight_grad_bytes == k);
  double bytes = 0, peak = 0;
  bool split_backward = false;
  for (const Action& act : ev.schedule.ranks[0]) {
    if (act.op == Op::F) bytes += a;
    if (act.op == Op::B) bytes += k - a, split_backward = true;
    if (act.op == Op::W) bytes -= k;
    if (act.op == Op::BW) bytes -= a;
    peak = std::max(peak, bytes);
  }
  CHECK(split_backward);
  CHECK(ev.sim.ranks[0].activation_peak_bytes == peak);
  // One micro-batch in flight at a time here: its B's K is the peak, above the A that the GPU rule (W's part
  // within F's) would stop at.
  CHECK(peak == k);
}

TEST_CASE("cuda accounting: the cpu backend's slots at the --dtype width, K and V per query head, fp32 statistics") {
  // executor/cuda/cuda_layers.cpp: GpuBlock keeps x-hat, norm output, Q, K, V (heads_rows x head_dim: every
  // query head), the attention output, up output, activation output and probabilities in the dtype, 1/rms in
  // fp32; GpuHead keeps the logits in the dtype with an fp32 log-sum-exp a token and the int32 targets.
  const Model model = counted_model();
  const Layer& embedding = model.layers.front();
  const Layer& block = model.layers[1];
  const Layer& head = model.layers.back();
  for (const auto& [accounting, e] : {std::pair{MemoryAccounting::CudaBf16, 2.0}, std::pair{MemoryAccounting::CudaFloat32, 4.0}}) {
    Workload w = cpu_workload();
    w.memory = accounting;
    const LayerWork em = layer_work(model, embedding, w);
    CHECK(em.activation_bytes == 64);
    CHECK(em.weight_grad_bytes == e * 256 + 64);
    CHECK(em.output_bytes == e * 256);
    // Block F: x-hat and output of both norms 4 x 256, Q K V O 16 x 4 x 16 (K and V at 16, not 8), up output
    // 16 x 48, SwiGLU output 16 x 24, probabilities 512 elements; 1/rms 2 x 16 floats.
    const double slots = 1024 + 1024 + 768 + 384;
    const LayerWork none = layer_work(model, block, w);
    CHECK(none.activation_bytes == e * (slots + 512) + 4 * 32);
    CHECK(layer_work(model, block, [&] { Workload s = w; s.recompute = Recompute::Selective; return s; }()).activation_bytes ==
          e * slots + 4 * 32);
    CHECK(layer_work(model, block, [&] { Workload f = w; f.recompute = Recompute::Full; return f; }()).activation_bytes ==
          e * 256);
    // B's terms: down (24 + 16), up (16 + 48), norm2 (16 + 16), out (16 + 16), qkv (16 + 16 + 2 x 16 expanded),
    // norm1 (16 + 16) = 264 elements a token.
    CHECK(none.weight_grad_bytes == e * 16 * 264);
    CHECK(none.output_bytes == e * 256);
    // Head F: x-hat and norm output 2 x 256, logits 16 x 32 in the dtype; 1/rms, log-sum-exp and targets 16 x 4 B each.
    const LayerWork hd = layer_work(model, head, w);
    CHECK(hd.activation_bytes == e * 1024 + 3 * 64);
    CHECK(hd.weight_grad_bytes == e * 1280);
  }
  Workload fp32 = cpu_workload();
  fp32.memory = MemoryAccounting::CudaFloat32;
  CHECK(layer_work(model, block, fp32).activation_bytes == 2 * layer_work(model, block, [&] {
          Workload b = fp32;
          b.memory = MemoryAccounting::CudaBf16;
          return b;
        }()).activation_bytes - 4 * 32);
}
