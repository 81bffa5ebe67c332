// Data-parallel attention with expert parallelism (serving/dp_attention_serving.hpp): the engines step in lockstep,
// a step costs each layer's slowest engine plus each MoE layer's dispatch and combine, the experts see every
// engine's tokens, requests alternate engines, and each GPU holds experts / (dp x tp) of them whole.
#include <catch2/catch.hpp>

#include <string>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/error.hpp"
#include "core/expert_parallel.hpp"
#include "core/overlapped_pair.hpp"
#include "serving/dp_attention_serving.hpp"

using namespace pw;

namespace {

// Qwen3-30B-A3B (48 MoE blocks, 128 experts, top 8, hidden 2048) on an H100 node.
struct Qwen3MoeOnH100 {
  Model model = model_preset("qwen3-30b-a3b");
  Cluster cluster = cluster_preset("dgx-h100");
  AnalyticCostModel cost;
};

ServingBatch prefill_of(long tokens) {
  ServingBatch b;
  b.prefill_tokens = tokens;
  b.prefill_sequences = 1;
  b.prefill_pairs = tokens * (tokens + 1) / 2.0;
  b.prefill_kv_reads = static_cast<double>(tokens);
  b.sampled_tokens = 1;
  return b;
}

ServingBatch decode_of(long context) {
  ServingBatch b;
  b.decode_tokens = 1;
  b.decode_context = static_cast<double>(context);
  b.sampled_tokens = 1;
  return b;
}

}  // namespace

TEST_CASE("a lockstep step: each layer's slowest engine, and each MoE layer's dispatch and combine of the busiest GPU") {
  const Qwen3MoeOnH100 x;
  const TransformerConfig& t = *x.model.transformer;
  ServingConfig engine;  // tp 1: 8 engines fill the node, ep 8
  std::vector<ServingBatch> batches(8);
  batches[0] = prefill_of(1000);
  const ServingExperts experts{8, 1000};
  double busiest = 0;
  int moe_layers = 0;
  for (const Layer& l : x.model.layers) {
    const ServingWork w = serving_layer_work(x.model, l, 1, batches[0], KvCacheDtype::Bf16, ServingWeights::Bf16, experts);
    busiest += x.cost.serving_time(l, w, x.cluster.gpu, x.cluster.intra_node, 1);
    if (l.kind == LayerKind::Block && t.moe_block(l.block)) {
      ++moe_layers;
      // 16 experts whole on this GPU, 1000 x 8 / 128 tokens each: the routed GEMMs of all 1000 tokens' copies.
      const double whole = layer_parameters(t, LayerKind::Block, l.block, 1).routed;
      const double dense = layer_parameters(t, LayerKind::Block, l.block, 1).dense;
      CHECK(w.gemm_flops == Approx(2 * dense * 1000 + 2 * (whole / 8) * 1000 * 8.0 / 128).epsilon(1e-12));
    }
  }
  REQUIRE(moe_layers == 48);
  // Dispatch and combine: 1000 tokens x 8 copies x 2048 x 2 bytes each way, over the node's 8 GPUs.
  ParallelConfig pc;
  pc.dp = 8;
  pc.ep = 8;
  const AllToAllLinks links = all_to_all_links(x.cluster, pc, 0);
  const double exchange = 2 * x.cost.all_to_all_time(1000.0 * 8 * 2048 * 2, links, RoutedDispatch{128, 8, false});
  CHECK(exchange > 0);
  CHECK(dp_attention_step_time(x.model, x.cluster, x.cost, engine, batches) ==
        Approx(busiest + moe_layers * exchange).epsilon(1e-12));
  // The busier engine sets the step: a second engine's short decode changes only what the experts receive.
  batches[1] = decode_of(10);
  const ServingExperts both{8, 1001};
  double with_decode = 0;
  for (const Layer& l : x.model.layers)
    with_decode += x.cost.serving_time(
        l, serving_layer_work(x.model, l, 1, batches[0], KvCacheDtype::Bf16, ServingWeights::Bf16, both), x.cluster.gpu,
        x.cluster.intra_node, 1);
  CHECK(dp_attention_step_time(x.model, x.cluster, x.cost, engine, batches) ==
        Approx(with_decode + moe_layers * exchange).epsilon(1e-12));
}

TEST_CASE("dp attention: a lone request's first token is one lockstep prefill, each next one a decode step") {
  const Qwen3MoeOnH100 x;
  ServingConfig engine;
  const ServingResult r = simulate_dp_attention(x.model, x.cluster, x.cost, engine, 2, {{0.0, 1000, 3}});
  const auto step = [&](const ServingBatch& b) {
    return dp_attention_step_time(x.model, x.cluster, x.cost, engine, {b, ServingBatch{}});
  };
  const double ttft = step(prefill_of(1000));
  CHECK(r.requests[0].first_token_s == Approx(ttft).epsilon(1e-12));
  CHECK(r.requests[0].last_token_s == Approx(ttft + step(decode_of(1001)) + step(decode_of(1002))).epsilon(1e-12));
  CHECK(r.batches == 3);
}

TEST_CASE("dp attention: requests alternate engines, whose experts see both engines' tokens") {
  const Qwen3MoeOnH100 x;
  ServingConfig engine;
  const ServingResult r = simulate_dp_attention(x.model, x.cluster, x.cost, engine, 2, {{0.0, 8000, 1}, {0.0, 8000, 1}});
  const double both = dp_attention_step_time(x.model, x.cluster, x.cost, engine, {prefill_of(8000), prefill_of(8000)});
  // Each engine prefills its own request in the same step.
  CHECK(r.requests[0].first_token_s == Approx(both).epsilon(1e-12));
  CHECK(r.requests[1].first_token_s == Approx(both).epsilon(1e-12));
  // 16,000 tokens' copies make the experts' GEMMs compute-bound: longer than with one engine's 8,000 (with 1,000
  // the experts' weights, read once, bound both alike).
  CHECK(both > dp_attention_step_time(x.model, x.cluster, x.cost, engine, {prefill_of(8000), ServingBatch{}}));
}

TEST_CASE("dp attention: each GPU holds the dense weights over tp and experts / (dp x tp) whole, the KV cache the rest") {
  const Qwen3MoeOnH100 x;
  ServingConfig engine;
  engine.tp = 2;
  const ServingResult r = simulate_dp_attention(x.model, x.cluster, x.cost, engine, 4, {{0.0, 16, 2}});
  const TransformerConfig& t = *x.model.transformer;
  double weights = 0;
  for (const Layer& l : x.model.layers) {
    const LayerParameters p = layer_parameters(t, l.kind, l.block, 2, 8, 1);
    weights += 2 * p.total();
  }
  // 48 layers x 4 KV heads / tp 2 x 128 x (K, V) x 2 bytes.
  const double per_token = 48.0 * 2 * 128 * 2 * 2;
  const long tokens =
      static_cast<long>((x.cluster.memory_capacity_at(0) * engine.gpu_memory_utilization - weights - engine.activation_reserve_bytes) /
                        per_token);
  CHECK(r.kv_capacity_tokens == tokens / engine.block_tokens * engine.block_tokens);
}

TEST_CASE("dp attention refuses a dense model, pp > 1, one engine and experts dp x tp does not divide") {
  const Qwen3MoeOnH100 x;
  ServingConfig engine;
  const auto refusal = [&](const Model& m, const ServingConfig& e, int dp) {
    try {
      simulate_dp_attention(m, x.cluster, x.cost, e, dp, {{0.0, 16, 2}});
    } catch (const Error& err) {
      CHECK(err.kind() == ErrorKind::BadInput);
      return std::string(err.what());
    }
    return std::string("no refusal");
  };
  CHECK(refusal(model_preset("llama3-8b"), engine, 2) ==
        "--dp-attention: model 'llama3-8b' has no routed experts; data-parallel attention spreads a mixture of experts' "
        "experts over the engines (serve copies of a dense engine with --replicas)");
  CHECK(refusal(x.model, engine, 1) == "--dp-attention: must be at least 2 engines, got 1");
  CHECK(refusal(x.model, engine, 3) ==
        "--dp-attention 3 x --tp 1: the 128 routed experts do not split evenly over 3 GPUs; pick dp x tp dividing 128, "
        "or add redundant experts (--redundant-experts) to a multiple of 3");
  ServingConfig replicated;
  replicated.redundant_experts = 5;
  CHECK(refusal(x.model, replicated, 3) ==
        "--dp-attention 3 x --tp 1: the 128 routed experts and 5 redundant ones do not split evenly over 3 GPUs; pick "
        "--redundant-experts so that experts + redundant is a multiple of 3");
  replicated.redundant_experts = 4;  // 132 slots, 44 on each of 3 GPUs
  CHECK(refusal(x.model, replicated, 3) == "no refusal");
  replicated.redundant_experts = -1;
  CHECK(refusal(x.model, replicated, 2) == "--redundant-experts: must be from 0 to 4096, got -1");
  ServingConfig piped;
  piped.pp = 2;
  CHECK(refusal(x.model, piped, 2) ==
        "--dp-attention: each engine runs one stage (pp 1), got --pp 2; use --tp for a wider engine");
}

TEST_CASE("dp attention groups: each group takes every groups-th request and serves it as a group alone") {
  const Qwen3MoeOnH100 x;
  ServingConfig engine;
  const std::vector<ServingRequest> requests{{0.0, 500, 4}, {0.001, 700, 3}, {0.002, 300, 5}, {0.003, 900, 2}};
  const ServingResult both = simulate_dp_attention_groups(x.model, x.cluster, x.cost, engine, 2, 2, requests);
  const ServingResult first = simulate_dp_attention(x.model, x.cluster, x.cost, engine, 2, {requests[0], requests[2]});
  const ServingResult second = simulate_dp_attention(x.model, x.cluster, x.cost, engine, 2, {requests[1], requests[3]});
  for (size_t j = 0; j < 2; ++j) {
    CHECK(both.requests[2 * j].first_token_s == first.requests[j].first_token_s);
    CHECK(both.requests[2 * j].last_token_s == first.requests[j].last_token_s);
    CHECK(both.requests[2 * j + 1].first_token_s == second.requests[j].first_token_s);
    CHECK(both.requests[2 * j + 1].last_token_s == second.requests[j].last_token_s);
  }
  CHECK(both.batches == first.batches + second.batches);
  CHECK_THROWS_WITH(simulate_dp_attention_groups(x.model, x.cluster, x.cost, engine, 2, 0, requests),
                    "--replicas: must be at least 1, got 0");
}

namespace {

// DeepSeek-V3 in fp8 on two H100 nodes: 16 engines of tp 1, ep 16 over both nodes.
struct DeepSeekOnTwoNodes {
  Model model = model_preset("deepseek-v3");
  Cluster cluster = cluster_preset("dgx-h100");
  AnalyticCostModel cost;
  ServingConfig engine = [] {
    ServingConfig c;
    c.weights = ServingWeights::Fp8;
    return c;
  }();
  AllToAllLinks links = [] {
    ParallelConfig pc;
    pc.dp = 16;
    pc.ep = 16;
    return all_to_all_links(cluster_preset("dgx-h100"), pc, 0);
  }();
  int moe_layers() const {
    int n = 0;
    for (const Layer& l : model.layers) n += l.kind == LayerKind::Block && model.transformer->moe_block(l.block);
    return n;
  }
  // Each layer's time for every engine's batch alike (the slowest is any of them).
  std::vector<double> layer_times(const ServingBatch& b, double all_tokens) const {
    std::vector<double> out;
    for (const Layer& l : model.layers)
      out.push_back(l.kind == LayerKind::Mtp ? 0.0
                                             : cost.serving_time(l, serving_layer_work(model, l, 1, b, KvCacheDtype::Bf16,
                                                                                       ServingWeights::Fp8,
                                                                                       ServingExperts{16, all_tokens}),
                                                                 cluster.gpu, cluster.intra_node, 1));
    return out;
  }
  // One dispatch (fp8: 1 + 4 / 128 bytes an element) and one combine (bf16) of `tokens` tokens' 8 copies.
  double exchange(double tokens, DeepEpKernels kernels) const {
    const TransformerConfig& t = *model.transformer;
    const double copies = tokens * 8 * t.hidden;
    const RoutedDispatch d{256, 8, kernels == DeepEpKernels::Normal, 8, 4, tokens, static_cast<int>(t.hidden), kernels};
    return cost.all_to_all_time((1 + 4.0 / 128) * copies, links, d) + cost.all_to_all_time(2 * copies, links, d);
  }
};

}  // namespace

TEST_CASE("dp attention's all-to-alls as DeepEP sends them: fp8 tokens out, bf16 back, once a node for a prefill") {
  const DeepSeekOnTwoNodes x;
  REQUIRE(x.links.across > 0);
  const std::vector<ServingBatch> prefills(16, prefill_of(2000));
  double compute = 0;
  for (double t : x.layer_times(prefill_of(2000), 32000)) compute += t;
  const double prefill = x.exchange(2000, DeepEpKernels::Normal);
  CHECK(dp_attention_step_time(x.model, x.cluster, x.cost, x.engine, prefills) ==
        Approx(compute + x.moe_layers() * prefill).epsilon(1e-12));
  // The normal kernels send a token once to the other node when any of its top 4 groups is there (4 of the 8 groups a
  // node): less than every copy over the network, as the low-latency kernels send them.
  CHECK(prefill < x.exchange(2000, DeepEpKernels::LowLatency));
  const std::vector<ServingBatch> decodes(16, decode_of(1000));
  double decode_compute = 0;
  for (double t : x.layer_times(decode_of(1000), 16)) decode_compute += t;
  CHECK(dp_attention_step_time(x.model, x.cluster, x.cost, x.engine, decodes) ==
        Approx(decode_compute + x.moe_layers() * x.exchange(1, DeepEpKernels::LowLatency)).epsilon(1e-12));
}

TEST_CASE("two-batch overlap: each MoE layer's halves overlap one's all-to-alls with the other's compute") {
  DeepSeekOnTwoNodes x;
  x.engine.two_batch_overlap = true;
  const std::vector<ServingBatch> prefills(16, prefill_of(2000));
  const auto [first, second] = split_in_two(prefill_of(2000));
  const std::vector<double> a = x.layer_times(first, 16000), b = x.layer_times(second, 16000);
  const double xa = x.exchange(1000, DeepEpKernels::Normal), xb = x.exchange(1000, DeepEpKernels::Normal);
  const double share = x.cost.all_to_all_sm_share();  // the normal kernels' 20 SMs
  double expected = 0, halves = 0;
  for (size_t i = 0; i < x.model.layers.size(); ++i) {
    const Layer& l = x.model.layers[i];
    halves += a[i] + b[i];
    expected += l.kind == LayerKind::Block && x.model.transformer->moe_block(l.block)
                    ? overlapped_pair_time(a[i] + xa, xa, b[i] + xb, xb, share)
                    : a[i] + b[i];
  }
  const double step = dp_attention_step_time(x.model, x.cluster, x.cost, x.engine, prefills);
  CHECK(step == Approx(expected).epsilon(1e-12));
  // Never below the halves' compute, and here, the all-to-alls shorter than the compute beside them, within the SMs'
  // share of it: the overlap hides them.
  CHECK(step >= halves);
  CHECK(step <= halves * (1 + share) + 1e-12);
  x.engine.two_batch_overlap = false;
  CHECK(step < dp_attention_step_time(x.model, x.cluster, x.cost, x.engine, prefills));
  // Decodes alone: the low-latency kernels wait on a receive hook and hold no SMs; a one-token batch is not split.
  x.engine.two_batch_overlap = true;
  const ServingBatch two = [] {
    ServingBatch d = decode_of(1000);
    d.decode_tokens = 2;
    d.decode_context = 2000;
    d.sampled_tokens = 2;
    return d;
  }();
  const std::vector<double> d = x.layer_times(decode_of(1000), 16);
  const double xd = x.exchange(1, DeepEpKernels::LowLatency);
  double decode_expected = 0;
  for (size_t i = 0; i < x.model.layers.size(); ++i) {
    const Layer& l = x.model.layers[i];
    decode_expected += l.kind == LayerKind::Block && x.model.transformer->moe_block(l.block)
                           ? overlapped_pair_time(d[i] + xd, xd, d[i] + xd, xd, 0.0)
                           : 2 * d[i];
  }
  CHECK(dp_attention_step_time(x.model, x.cluster, x.cost, x.engine, std::vector<ServingBatch>(16, two)) ==
        Approx(decode_expected).epsilon(1e-12));
  x.engine.two_batch_overlap = false;
  const double unsplit = dp_attention_step_time(x.model, x.cluster, x.cost, x.engine, std::vector<ServingBatch>(16, decode_of(1000)));
  x.engine.two_batch_overlap = true;
  CHECK(dp_attention_step_time(x.model, x.cluster, x.cost, x.engine, std::vector<ServingBatch>(16, decode_of(1000))) == unsplit);
}

TEST_CASE("dp attention with redundant experts: each GPU holds (experts + redundant) / ep of them, the cache the rest") {
  const Qwen3MoeOnH100 x;
  ServingConfig engine;
  engine.tp = 2;
  engine.redundant_experts = 32;  // 160 slots over 8 GPUs: 20 a GPU
  const ServingResult r = simulate_dp_attention(x.model, x.cluster, x.cost, engine, 4, {{0.0, 16, 2}});
  const TransformerConfig& t = *x.model.transformer;
  double weights = 0;
  for (const Layer& l : x.model.layers) {
    const LayerParameters p = layer_parameters(t, l.kind, l.block, 2, 8, 1);
    weights += 2 * (p.dense + p.routed * 160 / 128);
  }
  const double per_token = 48.0 * 2 * 128 * 2 * 2;
  const long tokens =
      static_cast<long>((x.cluster.memory_capacity_at(0) * engine.gpu_memory_utilization - weights - engine.activation_reserve_bytes) /
                        per_token);
  CHECK(r.kv_capacity_tokens == tokens / engine.block_tokens * engine.block_tokens);
}
