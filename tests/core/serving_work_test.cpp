// A serving iteration's work per layer (core/serving_work.hpp) and its analytic time: decode memory-bound on
// the weights, prefill compute-bound, the KV cache read and written, experts read as tokens reach them.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/error.hpp"
#include "core/serving_work.hpp"

using namespace pw;

namespace {

const Layer& first_block(const Model& m) {
  for (const Layer& l : m.layers)
    if (l.kind == LayerKind::Block) return l;
  throw std::runtime_error("no block");
}

ServingBatch decode(long sequences, double context_each) {
  ServingBatch b;
  b.decode_tokens = sequences;
  b.decode_context = sequences * context_each;
  b.sampled_tokens = sequences;
  return b;
}

// Llama 3 70B's first block at tp 8 on an H100 node, priced by the analytic model's defaults.
struct Llama70bAtTp8 {
  const Model m = model_preset("llama3-70b");
  const Layer& block = first_block(m);
  const GpuSpec gpu = cluster_preset("dgx-h100").gpu;
  const LinkSpec link = cluster_preset("dgx-h100").intra_node;
  const AnalyticCostParams params;
  const AnalyticCostModel cost{params};
  const double dense = layer_parameters(*m.transformer, LayerKind::Block, 0, 8).dense;
};

}  // namespace

TEST_CASE("decode at batch 1 reads the weights once, the GEMMs at weights over bandwidth, and a long prefill at FLOPs over peak") {
  const Llama70bAtTp8 x;
  const auto& [m, block, gpu, link, params, cost, dense] = x;

  const ServingWork one = serving_layer_work(m, block, 8, decode(1, 1024));
  CHECK(one.weight_bytes == 2 * dense);
  CHECK(one.gemm_flops == 2 * dense);
  // 512 bytes a token at tp 8: the 1024 cached read and the new one written.
  CHECK(one.kv_bytes == 512.0 * (1024 + 1));
  const double bandwidth = gpu.hbm_bytes_per_s * params.memory_efficiency;
  double comm = 0;
  for (const Collective& c : one.collectives) {
    // vLLM's custom all-reduce: two steps of one latency each over NVLink.
    CHECK(cost.serving_collective_time(c, 8, link) ==
          Approx(2 * (7.0 / 8 * c.bytes / (link.bandwidth_bytes_per_s * params.collective_efficiency) + link.latency_s))
              .epsilon(1e-12));
    comm += cost.serving_collective_time(c, 8, link);
  }
  CHECK(one.collectives.size() == 2);
  // Across nodes, or past 8 MiB, NCCL's ring.
  LinkSpec network = link;
  network.inter_node = true;
  const Collective huge{CollectiveKind::AllReduce, 16.0 * 1024 * 1024};
  CHECK(cost.serving_collective_time(one.collectives[0], 8, network) ==
        cost.collective_time(CollectiveKind::AllReduce, one.collectives[0].bytes, 8, network));
  CHECK(cost.serving_collective_time(huge, 8, link) == cost.collective_time(CollectiveKind::AllReduce, huge.bytes, 8, link));
  // A dense block's 11 kernels, its all-reduces apart, each with its fixed time beside its work.
  CHECK(one.kernels == 11);
  const double expected = one.weight_bytes / bandwidth + one.kv_bytes / bandwidth + one.elementwise_bytes / bandwidth +
                          comm + 11 * params.kernel_overhead_s;
  CHECK(cost.serving_time(block, one, gpu, link, 8) == Approx(expected).epsilon(1e-12));
  // The weights take most of it (80 blocks of them at 2.35 TB/s are 7.4 ms), the kernels' fixed time a third.
  CHECK(one.weight_bytes / bandwidth > 0.5 * cost.serving_time(block, one, gpu, link, 8));
  CHECK(11 * params.kernel_overhead_s > 0.25 * cost.serving_time(block, one, gpu, link, 8));

  // 4096 prompt tokens: the GEMMs at the peak, far beyond reading the weights.
  ServingBatch prefill;
  prefill.prefill_tokens = 4096;
  prefill.prefill_pairs = 4096.0 * 4097 / 2;
  prefill.prefill_kv_reads = 4096;
  prefill.sampled_tokens = 1;
  const ServingWork big = serving_layer_work(m, block, 8, prefill);
  const double gemm = big.gemm_flops / (gpu.peak_flops * params.gemm_efficiency);
  CHECK(big.gemm_flops == 2 * dense * 4096);
  CHECK(gemm > big.weight_bytes / bandwidth);
  // Causal attention: 2 (QK and AV) x 2 FLOPs x pairs x heads per rank x head size.
  CHECK(big.attention_flops == 4.0 * prefill.prefill_pairs * (64 / 8) * 128);
}

TEST_CASE("routed experts are read as tokens reach them, and the head scores the sampled tokens only") {
  const Model m = model_preset("deepseek-v3");
  const TransformerConfig& t = *m.transformer;
  const Layer* moe = nullptr;
  for (const Layer& l : m.layers)
    if (l.kind == LayerKind::Block && t.moe_block(l.block)) {
      moe = &l;
      break;
    }
  REQUIRE(moe);
  // At tp 8 every expert is split 8 ways (vLLM's FusedMoE without expert parallelism), as the dense matrices are.
  const LayerParameters p = serving_layer_parameters(t, *moe, 8);
  const LayerParameters whole = layer_parameters(t, LayerKind::Block, moe->block, 1);
  CHECK(p.routed == whole.routed / 8);
  CHECK(p.dense == layer_parameters(t, LayerKind::Block, moe->block, 8).dense);
  // Expert parallelism over 32 GPUs: 256 / 32 = 8 whole experts each.
  CHECK(serving_layer_parameters(t, *moe, 8, 32).routed == whole.routed / 32);
  const double share = 8.0 / 256;  // top 8 of 256 experts
  const ServingWork one = serving_layer_work(m, *moe, 8, decode(1, 100));
  CHECK(one.weight_bytes == Approx(2 * p.dense + 2 * p.routed * share).epsilon(1e-12));
  CHECK(one.gemm_flops == Approx(2 * p.dense + 2 * p.routed * share).epsilon(1e-12));
  const ServingWork many = serving_layer_work(m, *moe, 8, decode(4096, 100));
  CHECK(many.weight_bytes == Approx(2 * p.dense + 2 * p.routed * (1 - std::pow(1 - share, 4096))).epsilon(1e-12));
  // The latent cache: 1152 bytes a token on every rank.
  CHECK(one.kv_bytes == 1152.0 * (100 + 1));

  const Layer& head = m.layers.back().kind == LayerKind::Head ? m.layers.back() : m.layers[m.layers.size() - 2];
  ServingBatch b = decode(64, 100);
  b.prefill_tokens = 1000;
  b.sampled_tokens = 65;  // the 64 decodes and one prompt that completes
  const ServingWork logits = serving_layer_work(m, head, 8, b);
  const double head_params = layer_parameters(t, LayerKind::Head, head.block, 8).total();
  CHECK(logits.gemm_flops == 2 * head_params * 65);

  Model costs;
  costs.name = "costs";
  costs.layers.push_back(Layer{"l0", LayerKind::Explicit, ExplicitCosts{}});
  CHECK_THROWS_AS(serving_layer_work(costs, costs.layers[0], 1, b), Error);
}

TEST_CASE("fp8 weights: the blocks read half the bytes and run their GEMMs at the fp8 rate, embedding and head stay bf16") {
  const Llama70bAtTp8 x;
  const auto& [m, block, gpu, link, params, cost, dense] = x;

  const ServingWork bf16 = serving_layer_work(m, block, 8, decode(1, 1024));
  const ServingWork fp8 = serving_layer_work(m, block, 8, decode(1, 1024), KvCacheDtype::Bf16, ServingWeights::Fp8);
  CHECK(fp8.weight_bytes == dense);
  CHECK(fp8.gemm_flops == 0);
  CHECK(fp8.fp8_gemm_flops == bf16.gemm_flops);
  CHECK(fp8.kv_bytes == bf16.kv_bytes);
  // Decode at batch 1: the GEMMs take the weights over the bandwidth, now half of them.
  const double bandwidth = gpu.hbm_bytes_per_s * params.memory_efficiency;
  CHECK(cost.serving_time(block, bf16, gpu, link, 8) - cost.serving_time(block, fp8, gpu, link, 8) ==
        Approx((bf16.weight_bytes - fp8.weight_bytes) / bandwidth).epsilon(1e-9));
  CHECK(bf16.weight_bytes - fp8.weight_bytes == dense);
  // A 4096-token prefill is compute-bound: its GEMMs at the fp8 peak.
  ServingBatch prefill;
  prefill.prefill_tokens = 4096;
  prefill.prefill_sequences = 1;
  const ServingWork big = serving_layer_work(m, block, 8, prefill, KvCacheDtype::Bf16, ServingWeights::Fp8);
  CHECK(big.fp8_gemm_flops / (gpu.fp8_peak_flops * params.fp8_gemm_efficiency) > big.weight_bytes / bandwidth);
  // The embedding and the LM head are not quantized.
  CHECK(serving_layer_work(m, m.layers.front(), 8, decode(4, 10), KvCacheDtype::Bf16, ServingWeights::Fp8).weight_bytes ==
        serving_layer_work(m, m.layers.front(), 8, decode(4, 10)).weight_bytes);
  CHECK(serving_layer_work(m, m.layers.back(), 8, decode(4, 10), KvCacheDtype::Bf16, ServingWeights::Fp8).weight_bytes ==
        serving_layer_work(m, m.layers.back(), 8, decode(4, 10)).weight_bytes);
  CHECK(serving_weight_bytes(LayerKind::Block, ServingWeights::Fp8) == 1);
  CHECK(serving_weight_bytes(LayerKind::Head, ServingWeights::Fp8) == 2);
}

TEST_CASE("a batch in two halves: decodes dealt half and half, one prompt cut in two chunks, every sum the batch's") {
  ServingBatch b;
  b.decode_tokens = 7;
  b.decode_context = 7000;
  b.prefill_tokens = 4097;
  b.prefill_sequences = 1;
  b.prefill_pairs = 4097.0 * 4098 / 2;
  b.prefill_kv_reads = 4097;
  b.sampled_tokens = 8;
  const auto [x, y] = split_in_two(b);
  CHECK(x.decode_tokens == 3);
  CHECK(y.decode_tokens == 4);
  CHECK(x.decode_context == 3000);
  CHECK(y.decode_context == 4000);
  CHECK(x.prefill_tokens == 2048);
  CHECK(y.prefill_tokens == 2049);
  // The one prompt is a chunk in each half.
  CHECK(x.prefill_sequences == 1);
  CHECK(y.prefill_sequences == 1);
  CHECK(x.prefill_pairs + y.prefill_pairs == b.prefill_pairs);
  CHECK(x.prefill_pairs == Approx(b.prefill_pairs * 2048 / 4097).epsilon(1e-15));
  CHECK(x.prefill_kv_reads + y.prefill_kv_reads == b.prefill_kv_reads);
  CHECK(x.sampled_tokens + y.sampled_tokens == 8);
  CHECK(x.tokens() + y.tokens() == b.tokens());
  // Several prompts are dealt to the halves.
  b.prefill_sequences = 5;
  const auto [p, q] = split_in_two(b);
  CHECK(p.prefill_sequences == 2);
  CHECK(q.prefill_sequences == 3);
  // An empty batch gives two empty halves.
  const auto [e, f] = split_in_two(ServingBatch{});
  CHECK(e.tokens() == 0);
  CHECK(f.tokens() == 0);
  CHECK(e.decode_context == 0);
  CHECK(f.prefill_pairs == 0);
}

TEST_CASE("redundant expert slots: each GPU holds (experts + redundant) / ep of them, each reached by its share of the tokens") {
  const Model m = model_preset("deepseek-v3");
  const TransformerConfig& t = *m.transformer;
  const Layer& moe = m.layers[5];
  REQUIRE(moe.kind == LayerKind::Block);
  REQUIRE(t.moe_block(moe.block));
  // 256 experts and 32 redundant slots over 32 GPUs: 9 a GPU, where 8 of them hold 256 / 32.
  const LayerParameters plain = serving_layer_parameters(t, moe, 1, 32);
  const LayerParameters spread = serving_layer_parameters(t, moe, 1, 32, 32);
  CHECK(spread.dense == plain.dense);
  CHECK(spread.routed == Approx(plain.routed * 9 / 8).epsilon(1e-15));
  // No redundancy without ep: every expert is split over tp.
  CHECK(serving_layer_parameters(t, moe, 8, 1, 32).routed == serving_layer_parameters(t, moe, 8, 1).routed);
  // A decode of 100 tokens over all the engines: each slot sees 100 x 8 / 288 copies and is read when any reaches it.
  ServingBatch b;
  b.decode_tokens = 4;
  b.decode_context = 4000;
  b.sampled_tokens = 4;
  const ServingWork w = serving_layer_work(m, moe, 1, b, KvCacheDtype::Bf16, ServingWeights::Fp8, ServingExperts{32, 100, 32});
  CHECK(w.routed_weight_bytes == Approx(spread.routed * (1 - std::pow(1 - 8.0 / 288, 100))).epsilon(1e-12));
  // The routed FLOPs are the tokens' copies on this GPU, as without the replicas.
  const ServingWork none = serving_layer_work(m, moe, 1, b, KvCacheDtype::Bf16, ServingWeights::Fp8, ServingExperts{32, 100, 0});
  CHECK(w.routed_flops == Approx(none.routed_flops).epsilon(1e-12));
  CHECK(none.routed_flops == Approx(2 * plain.routed * 100 * 8.0 / 256).epsilon(1e-12));
}
