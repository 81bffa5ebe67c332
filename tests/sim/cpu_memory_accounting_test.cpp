// The simulator's memory under MemoryAccounting::CpuFloat32: what the CPU backend keeps per layer, counted by
// hand for a model small enough to count, and a B that keeps more for W than F kept for it.
#include <catch2/catch.hpp>

#include "core/cpu_kept_bytes.hpp"
#include "core/layer_work.hpp"
#include "core/analytic_cost_model.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

// n = b s = 8 tokens, h 8, q = 2 x 4 = 8, kv = 1 x 4 = 4, f 12 (SwiGLU: up output 24), V 16, a 2.
Model counted_model() {
  TransformerConfig c;
  c.family = "llama";
  c.hidden = 8;
  c.layers = 2;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 4;
  c.ffn = 12;
  c.vocab = 16;
  c.max_seq_len = 4;
  c.mlp = MlpKind::SwiGlu;
  c.norm = NormKind::RmsNorm;
  return make_transformer_model("counted", c);
}

Workload cpu_workload(Recompute recompute = Recompute::None) {
  Workload w;
  w.micro_batch_size = 2;
  w.seq_len = 4;
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

  // Embedding: F keeps the 8 token ids (32 B); B keeps dy (8 x 8 floats) and the ids for W: 256 + 32.
  LayerWork e = layer_work(model, embedding, cpu_workload());
  CHECK(e.activation_bytes == 32);
  CHECK(e.weight_grad_bytes == 288);
  CHECK(e.output_bytes == 256);

  // Block F: x-hat and norm output of both norms 4 x 64, 1/rms 2 x 8, Q K V O 8 x (8 + 4 + 4 + 8), up output
  // 8 x 24, SwiGLU output 8 x 12, softmax b a s^2 = 2 x 2 x 16: 256 + 16 + 192 + 192 + 96 + 64 = 816 floats.
  LayerWork none = layer_work(model, block, cpu_workload());
  CHECK(none.activation_bytes == 4 * 816);
  // B keeps per weight op its input and output gradient: down (12 + 8), up (8 + 24), norm2 (8 + 8), out (8 + 8),
  // qkv (8 + 16), norm1 (8 + 8) = 124 floats a token.
  CHECK(none.weight_grad_bytes == 4 * 8 * 124);
  CHECK(none.output_bytes == 4 * 64);
  // Selective drops the softmax (64 floats); full keeps the block input alone (64 floats). W keeps the same.
  CHECK(layer_work(model, block, cpu_workload(Recompute::Selective)).activation_bytes == 4 * (816 - 64));
  CHECK(layer_work(model, block, cpu_workload(Recompute::Full)).activation_bytes == 4 * 64);
  CHECK(layer_work(model, block, cpu_workload(Recompute::Full)).weight_grad_bytes == 4 * 8 * 124);

  // Head F: x-hat and norm output 2 x 64, 1/rms 8, probabilities 8 x 16, target ids 8: 4 x 264 + 32.
  LayerWork hd = layer_work(model, head, cpu_workload());
  CHECK(hd.activation_bytes == 4 * 264 + 32);
  // B: norm output + logit gradient (64 + 128), x-hat + norm gradient (64 + 64).
  CHECK(hd.weight_grad_bytes == 4 * 320);
  CHECK(hd.output_bytes == 0);

  // The GPU accounting is untouched: bf16, and W's part within F's.
  Workload gpu = cpu_workload();
  gpu.memory = MemoryAccounting::GpuBf16;
  const LayerWork g = layer_work(model, block, gpu);
  CHECK(g.output_bytes == 2 * 64);
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
  const double a = 32 + 2 * 4 * 816 + (4 * 264 + 32), k = 288 + 2 * 4 * 8 * 124 + 4 * 320;
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
