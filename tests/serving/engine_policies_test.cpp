// The engines' policies (serving/engine_profile.hpp): TensorRT-LLM's guaranteed-no-evict admission, SGLang's
// clipped reservation and its retraction order, prefill-first steps, eager launches, CUDA-graph padding and
// the host time a step exposes, each against its closed form; and the profiles' defaults.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/error.hpp"
#include "serving/engine_profile.hpp"
#include "serving/serving_metrics.hpp"
#include "serving/serving_sim.hpp"

using namespace pw;

namespace {

struct EngineSetup {
  Model model = model_preset("llama3-8b");
  Cluster cluster = cluster_preset("dgx-h100");
  AnalyticCostModel cost;
};

// llama3-8b's KV bytes a token at tp 1: 32 layers x K and V x 8 heads x 128 x 2 bytes.
constexpr double kTokenBytes = 32.0 * 2 * 8 * 128 * 2;

// The GPU memory that leaves the engine's KV cache `tokens` tokens (or one more: capacities are whole tokens).
double memory_for_tokens(EngineSetup& x, const ServingConfig& c, long tokens) {
  const ServingResult probe = simulate_serving(x.model, x.cluster, x.cost, c, {{0.0, 1, 1}});
  return x.cluster.gpu.memory_bytes +
         (static_cast<double>(tokens) + 0.5 - static_cast<double>(probe.kv_capacity_tokens)) * kTokenBytes / c.gpu_memory_utilization;
}

double lone_tpot(const EngineSetup& x, const ServingConfig& c) {
  const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, c, {{0.0, 100, 2}});
  return r.requests[0].last_token_s - r.requests[0].first_token_s;
}

bool decodes(const SequenceChunk& s, long prompt) { return s.start >= prompt; }

}  // namespace

TEST_CASE("guaranteed no evict: a request reserved whole at admission is never preempted, and as many run as fit whole") {
  EngineSetup x;
  x.cluster.gpu.memory_bytes = 22e9;  // 16 GB of weights: a few GB of cache
  std::vector<ServingRequest> many;
  for (int i = 0; i < 64; ++i) many.push_back({0.0, 2000, 600});
  ServingConfig vllm;
  CHECK(simulate_serving(x.model, x.cluster, x.cost, vllm, many).preemptions > 0);

  ServingConfig trt;
  trt.reserved_output_tokens = std::numeric_limits<long>::max();
  trt.block_tokens = 32;
  const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, trt, many);
  CHECK(r.preemptions == 0);
  // Each request holds ceil(2600 / 32) = 82 pages by its end; the cache's pages over that run at once.
  const long pages = r.kv_capacity_tokens / 32;
  REQUIRE(pages / 82 < 64);
  CHECK(r.max_running == pages / 82);
  for (const ServedRequest& q : r.requests) CHECK(q.preemptions == 0);
}

TEST_CASE("reserved outputs clipped: when short, SGLang retracts the fewest outputs then the longest prompt, vLLM the latest") {
  EngineSetup x;
  ServingConfig c;
  c.block_tokens = 1;
  c.reserved_output_tokens = 1;  // a clip far below the outputs: the cache runs short while both decode
  x.cluster.gpu.memory_bytes = memory_for_tokens(x, c, 1900);
  // Both prefill in the first step and decode together: at 200 outputs each they hold 1900 tokens.
  const std::vector<ServingRequest> two{{0.0, 1000, 300}, {0.0, 500, 300}};
  const ServingResult probe = simulate_serving(x.model, x.cluster, x.cost, c, two);
  REQUIRE((probe.kv_capacity_tokens == 1900 || probe.kv_capacity_tokens == 1901));

  c.retract = ServingRetract::FewestGenerated;
  const ServingResult sglang = simulate_serving(x.model, x.cluster, x.cost, c, two);
  CHECK(sglang.requests[0].preemptions == 1);  // equal outputs: the longer prompt goes
  CHECK(sglang.requests[1].preemptions == 0);

  c.retract = ServingRetract::LatestAdmitted;
  const ServingResult vllm = simulate_serving(x.model, x.cluster, x.cost, c, two);
  CHECK(vllm.requests[0].preemptions == 0);
  CHECK(vllm.requests[1].preemptions == 1);  // the last admitted goes

  // Admission keeps the running requests' reservations free: with a clip of 400 the first holds 1000 + 300
  // ahead, which leaves no room for the second's 500 + 300 until it ends; so neither is ever retracted.
  c.reserved_output_tokens = 400;
  c.retract = ServingRetract::FewestGenerated;
  const ServingResult reserved = simulate_serving(x.model, x.cluster, x.cost, c, two);
  CHECK(reserved.preemptions == 0);
  CHECK(reserved.max_running == 1);
  CHECK(reserved.requests[1].first_token_s > reserved.requests[0].last_token_s);
}

TEST_CASE("prefill-first: a step prefills or decodes, never both, where the mixed scheduler mixes") {
  EngineSetup x;
  std::vector<ServingRequest> arriving;
  for (int i = 0; i < 12; ++i) arriving.push_back({0.004 * i, 300, 20});
  ServingConfig c;
  c.record_steps = true;
  const ServingResult mixed = simulate_serving(x.model, x.cluster, x.cost, c, arriving);
  c.prefill_first = true;
  const ServingResult split = simulate_serving(x.model, x.cluster, x.cost, c, arriving);
  const auto mixes = [&](const ServingStep& step) {
    bool prefill = false, decode = false;
    for (const SequenceChunk& s : step) (decodes(s, 300) ? decode : prefill) = true;
    return prefill && decode;
  };
  long mixed_steps = 0;
  for (const ServingStep& s : mixed.steps) mixed_steps += mixes(s) ? 1 : 0;
  CHECK(mixed_steps > 0);
  for (const ServingStep& s : split.steps) CHECK_FALSE(mixes(s));
  // Decodes wait while later arrivals prefill: the first request's tokens come further apart.
  const auto tpot = [](const ServedRequest& q) { return (q.last_token_s - q.first_token_s) / (q.output_tokens - 1); };
  CHECK(tpot(split.requests[0]) > tpot(mixed.requests[0]));
}

TEST_CASE("eager: each step's kernels add their launches, host time per sequence delays each step") {
  EngineSetup x;
  ServingConfig c;
  const double graph = lone_tpot(x, c);
  c.eager = true;
  // 32 blocks of 11 kernels, the embedding's 1 and the head's 5.
  CHECK(lone_tpot(x, c) - graph == Approx((32 * 11 + 1 + 5) * kEagerLaunchSeconds).epsilon(1e-9));
  CHECK(serving_layer_kernels(*x.model.transformer, x.model.layers[1]) == 11);
  const Model moe = model_preset("qwen3-30b-a3b");
  CHECK(serving_layer_kernels(*moe.transformer, moe.layers[1]) == 18);
  c.eager = false;
  c.host_s_per_sequence = 1e-4;
  CHECK(lone_tpot(x, c) - graph == Approx(1e-4).epsilon(1e-9));
}

TEST_CASE("SGLang before 0.5.10 prefills eagerly: a step with prefills pays its launches at SGLang's eager rate") {
  EngineSetup x;
  const GpuSpec& gpu = x.cluster.gpu;
  const EngineProfile old = engine_profile("sglang", "0.5.6", x.model, gpu, 1, 1);
  const EngineProfile now = engine_profile("sglang", "0.5.10", x.model, gpu, 1, 1);
  CHECK((old.eager_prefill && !now.eager_prefill));
  CHECK(engine_profile("sglang", "0.5.9.post1", x.model, gpu, 1, 1).eager_prefill);
  CHECK(engine_profile("sglang", "", x.model, gpu, 1, 1).eager_prefill == false);  // the newest modelled
  CHECK(engine_profile("sglang", "0.5.23", x.model, gpu, 1, 2).eager_prefill);       // pp > 1 turns them off
  CHECK(engine_profile("vllm", "", x.model, gpu, 1, 1).eager_prefill == false);
  // PR 12160's 59.54 ms over DeepSeek-V3's 1,327 kernels a forward at tp 8.
  CHECK(old.launch_s == Approx(59.54e-3 / 1327).epsilon(1e-12));
  ServingConfig a, b;
  a.apply(old);
  b.apply(now);
  // One request of 100 prompt tokens and 2 outputs: its prefill step pays every launch (32 blocks of 11, the
  // embedding's 1 and the head's 5), its decode step none.
  const std::vector<ServingRequest> one{{0.0, 100, 2}};
  const ServingMetrics ma = serving_metrics(simulate_serving(x.model, x.cluster, x.cost, a, one));
  const ServingMetrics mb = serving_metrics(simulate_serving(x.model, x.cluster, x.cost, b, one));
  CHECK(ma.ttft_p50_s - mb.ttft_p50_s == Approx((32 * 11 + 1 + 5) * old.launch_s).epsilon(1e-9));
  CHECK(ma.tpot_p50_s == Approx(mb.tpot_p50_s).epsilon(1e-12));
}

TEST_CASE("CUDA graphs: a decode-only step is priced at the captured size it pads to") {
  EngineSetup x;
  ServingConfig c;
  c.graph_batch_sizes = {1, 2, 4, 8};
  c.pad_to_graph = true;
  std::vector<ServingRequest> five(5, ServingRequest{0.0, 100, 2});
  const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, c, five);
  // The second tokens: one decode step of five sequences at position 100, run as eight.
  ServingStep step;
  for (long i = 0; i < 5; ++i) step.push_back({i, 100, 1, true});
  ServingBatch padded = serving_batch(step);
  padded.decode_tokens = 8;
  const double time = serving_stage_time(x.model, {0, static_cast<int>(x.model.layers.size()) - 1}, 1, padded,
                                         x.cluster.gpu_at(0), x.cluster.link(0, 0), x.cost, KvCacheDtype::Bf16);
  CHECK(r.requests[0].last_token_s - r.requests[0].first_token_s == Approx(time).epsilon(1e-12));
  c.pad_to_graph = false;
  const ServingResult exact = simulate_serving(x.model, x.cluster, x.cost, c, five);
  CHECK(exact.requests[0].last_token_s - exact.requests[0].first_token_s < time);
}

TEST_CASE("engine profiles: each engine's defaults as its source sets them") {
  const Model llama = model_preset("llama3-8b");
  const GpuSpec h100 = cluster_preset("dgx-h100").gpu;
  const EngineProfile v1 = engine_profile("vllm", "", llama, h100, 1, 1);
  CHECK(v1.name == "vLLM V1");
  CHECK((v1.max_num_seqs == 1024 && v1.max_num_batched_tokens == 8192 && v1.chunked_prefill && !v1.prefill_first));
  CHECK(v1.reserved_output_tokens == 0);
  CHECK(v1.graph_batch_sizes.size() == 3 + 32 + 16);  // 1, 2, 4; 8..256 by 8; 272..512 by 16
  CHECK(v1.host_s_per_sequence * 256 == Approx(165e-6));
  const EngineProfile v0 = engine_profile("vllm", "0.6.3.post1", llama, h100, 1, 1);
  CHECK(v0.name == "vLLM V0");
  CHECK((v0.max_num_seqs == 256 && v0.max_num_batched_tokens == llama.default_seq_len() && !v0.chunked_prefill && v0.prefill_first));
  CHECK(engine_profile("vllm", "0.8.0", llama, h100, 1, 1).name == "vLLM V1");

  const EngineProfile sg = engine_profile("sglang", "", llama, h100, 1, 1);
  CHECK((sg.prefill_first && sg.block_tokens == 1 && sg.reserved_output_tokens == 4096));
  CHECK(sg.retract == ServingRetract::FewestGenerated);
  CHECK(sg.max_num_batched_tokens == 8192);
  CHECK(sg.graph_batch_sizes.back() == 256);
  // mem_fraction_static: the GPU less 512 MiB, 1.5 MiB an activation token of 8192, 1/8 GiB a GPU of tp x pp,
  // 2 MiB a decode graph size up to 256 and 8 MiB each of the 58 prefill buckets up to 8192.
  const double mib = h100.memory_bytes / (1024.0 * 1024.0);  // 81,008.6 MiB (79.11 GiB)
  CHECK(sg.memory_share == Approx(std::round((mib - (512 + 12288 + 128 + 512 + 58 * 8)) / mib * 1000) / 1000));
  CHECK(sg.reserve_bytes == 0);
  CHECK(engine_profile("sglang", "", llama, h100, 4, 1).graph_batch_sizes.back() == 512);

  const EngineProfile trt = engine_profile("trtllm", "1.0", llama, h100, 1, 1);
  CHECK((trt.max_num_seqs == 2048 && trt.max_num_batched_tokens == 8192 && !trt.chunked_prefill && !trt.prefill_first));
  CHECK((trt.block_tokens == 32 && trt.share_of_free && !trt.pad_to_graph));
  CHECK(trt.reserved_output_tokens == std::numeric_limits<long>::max());

  const auto bad = [&](const char* engine, const char* version) {
    try {
      engine_profile(engine, version, llama, h100, 1, 1);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(bad("tgi", "") == "--engine: 'tgi' is not one; use vllm, sglang or trtllm");
  CHECK(bad("vllm", "latest") == "--engine-version: 'latest' is not a version; give MAJOR.MINOR[.PATCH] (e.g. 0.6.3)");
}
