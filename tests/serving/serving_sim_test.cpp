// Serving (serving/serving_sim.hpp): an idle engine's first token is one prefill through every stage, a lone
// decode's next tokens one decode each, a saturated pipeline runs at its slowest stage's rate, and the KV
// cache's limit preempts.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/error.hpp"
#include "serving/serving_sim.hpp"

using namespace pw;

namespace {

struct Setup {
  Model model = model_preset("llama3-8b");
  Cluster cluster = cluster_preset("dgx-h100");
  AnalyticCostModel cost;
};

// Stage s of a tp x pp engine on one node: its time for the batch and the link to the next stage.
double stage_time(const Setup& x, const std::vector<LayerRange>& stages, int tp, int s, const ServingBatch& b) {
  ParallelConfig pc;
  pc.tp = tp;
  pc.pp = static_cast<int>(stages.size());
  return serving_stage_time(x.model, stages[static_cast<size_t>(s)], tp, b, x.cluster.gpu_at(s * tp),
                            group_links(x.cluster, pc, s * tp).tp, x.cost, KvCacheDtype::Bf16);
}

double transfer(const Setup& x, int tp, int s, long tokens) {
  const LinkSpec l = x.cost.p2p_link(x.cluster.link(s * tp, (s + 1) * tp));
  return l.latency_s + tokens * x.model.transformer->hidden * 2.0 / l.bandwidth_bytes_per_s;
}

}  // namespace

TEST_CASE("an idle engine's first token is one prefill through every stage and its transfers, each next one after the token's return") {
  const Setup x;
  ServingConfig c;
  c.tp = 2;
  c.pp = 2;
  const std::vector<ServingRequest> one{{0.0, 1000, 3}};
  const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, c, one);
  const std::vector<LayerRange> stages = split_layers(x.model, 2, {});
  ServingBatch prefill;
  prefill.prefill_tokens = 1000;
  prefill.prefill_pairs = 1000.0 * 1001 / 2;
  prefill.prefill_kv_reads = 1000;
  prefill.sampled_tokens = 1;
  const double ttft = stage_time(x, stages, 2, 0, prefill) + transfer(x, 2, 0, 1000) + stage_time(x, stages, 2, 1, prefill);
  CHECK(r.requests[0].first_token_s == Approx(ttft).epsilon(1e-12));
  // Then two decodes, each after the sampled token's return from the last stage to the first (4 bytes over
  // their link), one token through both stages, its context one longer.
  const LinkSpec back = x.cost.p2p_link(x.cluster.link(2, 0));
  double t = ttft;
  for (long context : {1001L, 1002L}) {
    ServingBatch d;
    d.decode_tokens = 1;
    d.decode_context = static_cast<double>(context);
    d.sampled_tokens = 1;
    t += back.latency_s + 4.0 / back.bandwidth_bytes_per_s;
    t += stage_time(x, stages, 2, 0, d) + transfer(x, 2, 0, 1) + stage_time(x, stages, 2, 1, d);
  }
  CHECK(r.requests[0].last_token_s == Approx(t).epsilon(1e-12));
  CHECK(r.batches == 3);
  CHECK(r.preemptions == 0);
}

TEST_CASE("a saturated pipeline runs at its slowest stage's rate") {
  const Setup x;
  ServingConfig c;
  c.tp = 1;
  c.pp = 2;
  // Stage 1 holds three times the blocks of stage 0.
  c.stages = {LayerRange{0, 8}, LayerRange{9, x.model.num_layers() - 1}};
  // 128 sequences, the token budget splitting them into two batches of 64 that alternate in the pipeline.
  c.max_num_seqs = 128;
  c.max_num_batched_tokens = 64 * 128;
  std::vector<ServingRequest> many;
  for (int i = 0; i < 128; ++i) many.push_back({0.0, 128, 400});
  const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, c, many);
  // The slow stage is never idle after the first prefill reaches it, except while the last batches drain.
  const double slow = r.stage_busy_s[1], fast = r.stage_busy_s[0];
  CHECK(slow > 2 * fast);
  CHECK(slow / r.makespan_s > 0.97);
  long tokens = 0;
  for (const ServedRequest& q : r.requests) tokens += q.output_tokens;
  CHECK(tokens == 128 * 400);
}

TEST_CASE("the KV cache's limit preempts the latest requests, which finish later") {
  Setup x;
  x.cluster.gpu.memory_bytes = 22e9;  // 16 GB of llama3-8b weights: a few GB of cache
  ServingConfig c;
  c.max_num_seqs = 256;
  std::vector<ServingRequest> many;
  for (int i = 0; i < 64; ++i) many.push_back({0.0, 2000, 600});
  const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, c, many);
  CHECK(r.preemptions > 0);
  CHECK(r.peak_kv_use <= 1.0);
  CHECK(r.peak_kv_use > 0.9);
  for (const ServedRequest& q : r.requests) {
    CHECK(q.first_token_s > 0);
    CHECK(q.last_token_s >= q.first_token_s);
  }
}

TEST_CASE("serving: a request larger than the cache, or weights that leave none, are refused") {
  Setup x;
  ServingConfig c;
  x.cluster.gpu.memory_bytes = 22e9;
  const ServingResult probe = simulate_serving(x.model, x.cluster, x.cost, c, {{0.0, 10, 1}});
  const long capacity = probe.kv_capacity_tokens;
  try {
    simulate_serving(x.model, x.cluster, x.cost, c, {{0.0, capacity, 10}});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "request 0: " + std::to_string(capacity + 10) + " tokens do not fit the KV cache's " +
                                       std::to_string(capacity) +
                                       " tokens (tp 1, pp 1); use more GPUs, --kv-cache-dtype fp8 or shorter requests");
  }
  x.cluster.gpu.memory_bytes = 16e9;
  CHECK_THROWS_AS(simulate_serving(x.model, x.cluster, x.cost, c, {{0.0, 10, 1}}), Error);
}

// vllm/engine/arg_utils.py, EngineArgs._set_default_args (vLLM 99d7eb5d): `vllm serve` on GPUs of 70 GiB or
// more other than the A100 schedules up to 1024 sequences and 8192 tokens, elsewhere 256 and 2048.
TEST_CASE("vllm serve's scheduler limits follow the GPU") {
  const SchedulerLimits h100 = vllm_serve_defaults(cluster_preset("dgx-h100").gpu);
  CHECK((h100.max_num_seqs == 1024 && h100.max_num_batched_tokens == 8192));
  const SchedulerLimits a100 = vllm_serve_defaults(cluster_preset("dgx-a100-80gb").gpu);
  CHECK((a100.max_num_seqs == 256 && a100.max_num_batched_tokens == 2048));
  GpuSpec small = cluster_preset("dgx-h100").gpu;
  small.memory_bytes = 48e9;
  CHECK(vllm_serve_defaults(small).max_num_seqs == 256);
}

TEST_CASE("a mixture of experts at tp 8 holds an eighth of every expert per GPU, and its KV cache the rest") {
  // Mixtral 8x7B on an 80 GB H100 node, as vLLM serves it without expert parallelism.
  const Model m = model_preset("mixtral-8x7b");
  const Cluster cluster = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  ServingConfig c;
  c.tp = 8;
  const ServingResult r = simulate_serving(m, cluster, cost, c, {{0.0, 16, 2}});
  double weights = 0;
  for (const Layer& l : m.layers)
    if (l.kind != LayerKind::Mtp) weights += 2 * serving_layer_parameters(*m.transformer, l, 8).total();
  // 32 layers x 1 of the 8 KV heads x 128 x (K, V) x 2 bytes on each GPU.
  const double per_token = 32.0 * 128 * 2 * 2;
  const long tokens = static_cast<long>((cluster.memory_capacity_at(0) * c.gpu_memory_utilization - weights -
                                         c.activation_reserve_bytes) / per_token);
  CHECK(r.kv_capacity_tokens == tokens / c.block_tokens * c.block_tokens);
  CHECK(weights < 12e9);  // 46.7 B parameters / 8 in bf16, not the 90 GB of experts held whole
}
