// Context parallelism: each sequence split over cp GPUs (Megatron's ring attention through Transformer
// Engine), its K/V ring, and the dp-cp group that reduces gradients and shards the ZeRO state.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/layer_work.hpp"
#include "core/stage_costs.hpp"
#include "sim/scenario.hpp"

using namespace pw;

namespace {

// A Llama 3 8B block's micro-batch: b = 1, s = 8192, tp 1, fused attention.
Workload llama_block(int cp) {
  Workload w;
  w.micro_batch_size = 1;
  w.seq_len = 8192;
  w.cp = cp;
  return w;
}

Scenario llama_scenario(int cp, int seq_len) {
  Scenario s;
  s.model = model_preset("llama3-8b");
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.tp = 2;
  s.parallel.cp = cp;
  s.parallel.pp = 2;
  s.parallel.dp = 2;
  s.parallel.microbatches = 4;
  s.workload.seq_len = seq_len;
  return s;
}

}  // namespace

TEST_CASE("cp: a rank holds s / cp tokens, its queries attending to all s keys: work and activations / cp") {
  const Model m = model_preset("llama3-8b");
  const LayerWork one = layer_work(m, m.layers[1], llama_block(1));
  const LayerWork four = layer_work(m, m.layers[1], llama_block(4));
  // Every GEMM is over the rank's 2048 tokens; the attention core 4 b (s / cp) s (a hd) = 4 x 2048 x 8192 x
  // 4096 FLOPs, a quarter of the whole sequence's; every stored activation is linear in the tokens kept.
  CHECK(four.forward.attention_flops == 4.0 * 2048 * 8192 * 4096);
  CHECK(four.forward.attention_flops == one.forward.attention_flops / 4);
  CHECK(four.backward_input.attention_flops == one.backward_input.attention_flops / 4);
  CHECK(four.forward.gemm_flops == one.forward.gemm_flops / 4);
  CHECK(four.backward_weight.gemm_flops == one.backward_weight.gemm_flops / 4);
  CHECK(four.activation_bytes == Approx(one.activation_bytes / 4).epsilon(1e-12));
  CHECK(four.output_bytes == one.output_bytes / 4);
  // Labelled with the whole sequence, so that no measurement of a shorter one is taken for it.
  CHECK(four.seq_len == 8192);
  CHECK(four.cp == 4);
}

TEST_CASE("cp: the ring passes K and V (F) and K, V, dK, dV (B) to the next rank in cp - 1 steps") {
  const Model m = model_preset("llama3-8b");
  const LayerWork lw = layer_work(m, m.layers[1], llama_block(4));
  // K and V of 8 heads x 128 over 2048 tokens in bf16: 2 x 2 x 2048 x 1024 bytes.
  const double chunk = 2 * 2 * 2048 * 1024.0;
  CHECK(lw.forward.cp_ring_steps == 3);
  CHECK(lw.forward.cp_ring_step_bytes == chunk);
  CHECK(lw.backward_input.cp_ring_steps == 3);
  CHECK(lw.backward_input.cp_ring_step_bytes == 2 * chunk);
  CHECK(lw.backward_weight.cp_ring_steps == 0);
  // The chunks in flight in B (K, V, dK, dV) join the working memory.
  CHECK(lw.working_bytes - layer_work(m, m.layers[1], llama_block(1)).working_bytes ==
        Approx(4 * chunk + 2.0 * 14336 * 2 * (2048 - 8192)).epsilon(1e-12));
  CHECK(layer_work(m, m.layers[1], llama_block(1)).forward.cp_ring_steps == 0);
}

TEST_CASE("cp: each ring step costs the longer of its transfer and one chunk's attention") {
  const Model m = model_preset("llama3-8b");
  const LayerWork lw = layer_work(m, m.layers[1], llama_block(4));
  const GpuSpec gpu = cluster_preset("dgx-h100").gpu;
  const AnalyticCostModel cost;
  const AnalyticCostParams p;
  // Forward: 4 chunks of attention, 2.75e11 / 4 FLOPs each at 989 TFLOP/s x 0.45. Over a 1 GB/s link the
  // transfer (x 0.80 p2p efficiency, 10 us latency) is longer: 3 x (transfer - chunk) shows.
  const LinkSpec slow{1e9, 1e-5};
  const double chunk_s = lw.forward.attention_flops / (gpu.peak_flops * p.attention_efficiency) / 4;
  const double transfer_s = 1e-5 + lw.forward.cp_ring_step_bytes / (1e9 * p.p2p_efficiency);
  CHECK(cost.cp_ring_time(lw, Phase::Forward, gpu, slow) == Approx(3 * (transfer_s - chunk_s)).epsilon(1e-12));
  const double b_chunk_s = lw.backward_input.attention_flops / (gpu.peak_flops * p.attention_efficiency) / 4;
  const double b_transfer_s = 1e-5 + lw.backward_input.cp_ring_step_bytes / (1e9 * p.p2p_efficiency);
  CHECK(cost.cp_ring_time(lw, Phase::BackwardInput, gpu, slow) == Approx(3 * (b_transfer_s - b_chunk_s)).epsilon(1e-12));
  // Over NVLink (450 GB/s) 8.4 MB take 23 us, behind each 156 us chunk: nothing shows.
  CHECK(cost.cp_ring_time(lw, Phase::Forward, gpu, LinkSpec{450e9, 1e-6}) == 0);
  CHECK(cost.cp_ring_time(lw, Phase::BackwardWeight, gpu, slow) == 0);
}

TEST_CASE("cp: gradients are reduced and ZeRO state sharded over the dp x cp GPUs") {
  const AnalyticCostModel cost;
  ParallelConfig pc;
  pc.dp = 2;
  pc.cp = 4;
  CHECK(pc.dp_cp() == 8);
  CHECK(state_bytes_per_parameter(cost, pc) == 2 + 4 + 12.0 / 8);
  pc.zero = 3;
  pc.reshard_after_forward = ParallelConfig::Reshard::Always;
  CHECK(state_bytes_per_parameter(cost, pc) == 18.0 / 8);
  // cp sits next to tp (Megatron's tp-cp-...): GPU = ((dp pp + p) cp + c) tp + t under tp-pp-dp.
  pc.tp = 2;
  pc.pp = 3;
  CHECK(global_rank(pc, RankOrder::TpPpDp, 1 * 2 + 1, 2, 1) == ((1 * 3 + 2) * 4 + 1) * 2 + 1);
  CHECK(global_rank(pc, RankOrder::TpDpPp, 1 * 2 + 1, 2, 1) == ((2 * 2 + 1) * 4 + 1) * 2 + 1);
  CHECK(pc.gpus() == 2 * 4 * 3 * 2);
}

TEST_CASE("cp: a stage's reduction runs over dp x cp ranks on the slower of the cp and dp links") {
  // tp 8 x cp 2 on dgx-h100: the cp peer is 8 GPUs on, in the next node; dp 1 still reduces over the 2.
  Scenario s = llama_scenario(2, 8192);
  s.parallel.tp = 8;
  s.parallel.pp = 1;
  s.parallel.dp = 1;
  const Evaluation ev = evaluate(s, AnalyticCostModel());
  const StageCost& c = ev.stages[0].cost;
  const AnalyticCostModel cost;
  const LinkSpec network = s.cluster.inter_node;
  CHECK(c.grad_reduce_bytes == c.parameters * 4);
  CHECK(c.grad_bucket_s == Approx(cost.collective_time(CollectiveKind::ReduceScatter, c.parameters * 4 / c.grad_buckets,
                                                       2, network))
                               .epsilon(1e-12));
  CHECK(c.optimizer_s == Approx(cost.optimizer_step_time(c.parameters / 2, s.cluster.gpu, {})).epsilon(1e-12));
}

TEST_CASE("cp: the step's tokens and model FLOPs are the whole sequences', the GPUs are tp x cp x pp x dp") {
  const AnalyticCostModel cost;
  const Evaluation one = evaluate(llama_scenario(1, 8192), cost);
  const Evaluation two = evaluate(llama_scenario(2, 8192), cost);
  CHECK(two.scenario.parallel.gpus() == 16);
  CHECK(two.metrics.tokens_per_iteration == one.metrics.tokens_per_iteration);
  CHECK(two.metrics.model_flops_per_iteration == one.metrics.model_flops_per_iteration);
  CHECK(two.stages[0].cost.activation_bytes == Approx(one.stages[0].cost.activation_bytes / 2).epsilon(1e-12));
  CHECK(two.metrics.step_time_s < one.metrics.step_time_s);
}

TEST_CASE("cp: sequences it cannot split, unfused attention, windows and explicit models are refused") {
  CHECK(bad_input([] { resolve(llama_scenario(3, 8192)); }) ==
        "--cp: 3 splits each sequence into 2 x 3 = 6 chunks, which do not divide --seq-len 8192; use a sequence length "
        "that is a multiple of 6");
  Scenario s = llama_scenario(3, 8190);
  s.parallel.tp = 4;
  CHECK(bad_input([&] { resolve(s); }) ==
        "--cp: each cp rank's 2730 tokens do not split over --tp 4 for sequence parallelism; use a --seq-len that is a "
        "multiple of 12");
  s = llama_scenario(2, 8192);
  s.workload.flash_attention = false;
  CHECK(bad_input([&] { resolve(s); }) ==
        "--cp: context parallelism runs on fused attention (Transformer Engine's ring attention); drop "
        "--no-flash-attention or use --cp 1");
  s = llama_scenario(2, 8192);
  s.model.transformer->attention_window = 4096;
  CHECK(bad_input([&] { resolve(s); }) ==
        "--cp: 'llama3-8b' attends over a sliding window of 4096 tokens, which the cp ring does not model; use --cp 1");
  s = llama_scenario(0, 8192);
  CHECK(bad_input([&] { resolve(s); }) == "--cp: must be at least 1, got 0");
}
