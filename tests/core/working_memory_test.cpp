// The working memory of the layer being computed (LayerWork::working_bytes): closed forms per recompute
// level and attention kind.
#include <catch2/catch.hpp>

#include "core/layer_work.hpp"

using namespace pw;

namespace {

Workload gpt3_workload(Recompute r, bool flash) {
  Workload w;
  w.micro_batch_size = 1;
  w.seq_len = 2048;
  w.tp = 8;
  w.sequence_parallel = true;
  w.recompute = r;
  w.flash_attention = flash;
  return w;
}

}  // namespace

TEST_CASE("working memory of a GPT-3 175B block and head at s 2048, b 1, tp 8") {
  const Model m = model_preset("gpt3-175b");
  const Layer& block = m.layers[1];
  const double a = 96, s = 2048, t = 8, f = 4 * 12288;
  const double mlp_grad = 2 * s * f / t;  // bf16 gradient of the MLP's inner tensor
  const double s2 = a * s * s / t;        // this rank's heads' s x s elements
  // No recompute: B's gradients only; unfused attention adds the 2-byte softmax and score gradients.
  CHECK(layer_work(m, block, gpt3_workload(Recompute::None, true)).working_bytes == mlp_grad);
  CHECK(layer_work(m, block, gpt3_workload(Recompute::None, false)).working_bytes == mlp_grad + 2 * 2 * s2);
  // Selective without fused attention: the scores, softmax and 1-byte dropout mask it dropped, rebuilt in B.
  CHECK(layer_work(m, block, gpt3_workload(Recompute::Selective, false)).working_bytes ==
        (2 * 2 + 1) * s2 + mlp_grad + 2 * 2 * s2);
  // Selective with fused attention drops nothing.
  CHECK(layer_work(m, block, gpt3_workload(Recompute::Selective, true)).working_bytes == mlp_grad);
  // Full: everything the block would store, less the input it keeps.
  for (bool flash : {true, false}) {
    const double none = layer_work(m, block, gpt3_workload(Recompute::None, flash)).activation_bytes;
    const LayerWork full = layer_work(m, block, gpt3_workload(Recompute::Full, flash));
    CHECK(full.working_bytes == none - full.activation_bytes + mlp_grad + (flash ? 0 : 2 * 2 * s2));
  }
  // The head: this rank's bf16 logits (s x V / t), in F before the fp32 loss and in B as their gradient.
  CHECK(layer_work(m, m.layers.back(), gpt3_workload(Recompute::None, true)).working_bytes == 2 * s * 51200 / t);
  CHECK(layer_work(m, m.layers.front(), gpt3_workload(Recompute::None, true)).working_bytes == 0);
  // The backends' accountings measure kept tensors only.
  Workload cpu = gpt3_workload(Recompute::None, true);
  cpu.memory = MemoryAccounting::CpuFloat32;
  CHECK(layer_work(m, block, cpu).working_bytes == 0);
}
