// Speculative decoding in the serving engine (ServingConfig::speculative_tokens): the tokens a step gives, each
// step's verification and draft against their closed forms, the gaps as the benchmark tools count them, the floor
// serve plan prunes with, and what is refused.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/expert_parallel.hpp"
#include "serving/dp_attention_serving.hpp"
#include "serving/serving_replicas.hpp"
#include "serving/serving_sim.hpp"

using namespace pw;

namespace {

struct Lone {
  Model model = model_preset("llama3-8b");
  Cluster cluster = cluster_preset("dgx-h100");
  AnalyticCostModel cost;
  int last_block = 0, head = 0;
  Lone() {
    for (int i = 0; i < static_cast<int>(model.layers.size()); ++i) {
      if (model.layers[static_cast<size_t>(i)].kind == LayerKind::Block) last_block = i;
      if (model.layers[static_cast<size_t>(i)].kind == LayerKind::Head) head = i;
    }
  }
  double stage(const ServingBatch& b, LayerRange layers) const {
    return serving_stage_time(model, layers, 1, b, cluster.gpu, cluster.intra_node, cost, KvCacheDtype::Bf16);
  }
  // One verification of k drafts after `start` cached positions, and the k draft steps before it.
  double step(long start, int k) const {
    const ServingBatch verify = serving_batch({{0, start, k + 1, true, true}});
    ServingBatch draft;
    draft.decode_tokens = 1;
    draft.decode_context = static_cast<double>(start + 1);
    draft.sampled_tokens = 1;
    return stage(verify, {0, static_cast<int>(model.layers.size()) - 1}) +
           k * (stage(draft, {last_block, last_block}) + stage(draft, {head, head}));
  }
};

ServingConfig speculating(int k, double acceptance) {
  ServingConfig c;
  c.speculative_tokens = k;
  c.acceptance_rate = acceptance;
  c.speculative_method = "mtp";
  c.record_steps = true;
  return c;
}

}  // namespace

TEST_CASE("a speculative step gives (1 - a^(K+1)) / (1 - a) tokens on average, floor((j+1)E) - floor(jE) at step j") {
  CHECK(speculative_tokens_per_step(3, 1.0) == 4);
  CHECK(speculative_tokens_per_step(2, 0.5) == 1.75);
  CHECK(speculative_tokens_per_step(1, 0.6) == Approx(1.6).epsilon(1e-12));
  std::vector<long> given;
  for (long j = 0; j < 4; ++j) given.push_back(speculative_tokens_at_step(j, 2, 0.5));
  CHECK(given == std::vector<long>{1, 2, 2, 2});  // 1.75, 3.5, 5.25, 7: each product's floor, the same every run
  long sum = 0;
  for (long j = 0; j < 5; ++j) sum += speculative_tokens_at_step(j, 1, 0.6);
  CHECK(sum == 8);
}

TEST_CASE("every draft accepted: a lone request's steps are K + 1 positions each, its TPOT their time over K + 1") {
  const Lone x;
  // 100 prompt tokens, 1 + 4 x 5 outputs: the prefill's token, then 5 steps of 4.
  const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, speculating(3, 1.0), {{0.0, 100, 21}});
  REQUIRE(r.steps.size() == 6);
  double expected = 0;
  for (long j = 0; j < 5; ++j) {
    CHECK(r.steps[static_cast<size_t>(j + 1)] == ServingStep{{0, 100 + 4 * j, 4, true, true}});
    expected += x.step(100 + 4 * j, 3);
  }
  const ServedRequest& q = r.requests[0];
  CHECK(q.last_token_s - q.first_token_s == Approx(expected).epsilon(1e-12));
  // The tokens of a step arrive together: five gaps, one a step (vllm bench serve's and sglang.bench_serving's ITL).
  long gaps = 0;
  for (const auto& [seconds, count] : r.token_gaps) gaps += count;
  CHECK(gaps == 5);
}

TEST_CASE("drafts accepted at a = 0.5 with K = 2: steps give 1, 2, 2, 2 tokens and keep those positions' KV") {
  const Lone x;
  const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, speculating(2, 0.5), {{0.0, 100, 8}});
  // 7 tokens after the first: 1.75 a step, 4 steps, each verifying from where the accepted ones ended.
  REQUIRE(r.steps.size() == 5);
  const std::vector<long> starts{100, 101, 103, 105};
  double expected = 0;
  for (size_t j = 0; j < starts.size(); ++j) {
    CHECK(r.steps[j + 1] == ServingStep{{0, starts[j], 3, true, true}});
    expected += x.step(starts[j], 2);
  }
  CHECK(r.requests[0].last_token_s - r.requests[0].first_token_s == Approx(expected).epsilon(1e-12));
  CHECK(r.requests[0].output_tokens == 8);
}

TEST_CASE("serve plan's floor with speculative decoding stays under every request's time per output token") {
  const Lone x;
  const std::vector<ServingRequest> requests{{0.0, 100, 41}, {0.0, 500, 30}};
  for (double a : {1.0, 0.7}) {
    const ServingConfig c = speculating(3, a);
    const ServingResult r = simulate_serving(x.model, x.cluster, x.cost, c, requests);
    const ServingFloor f = serving_floor(x.model, x.cluster, x.cost, c, requests);
    REQUIRE(f.token_gap_s.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
      const ServedRequest& q = r.requests[i];
      const double tpot = (q.last_token_s - q.first_token_s) / static_cast<double>(q.output_tokens - 1);
      CHECK(f.token_gap_s[i] <= tpot);
    }
    // The floor: a step at the shortest context over the K + 1 tokens it gives at most.
    CHECK(f.token_gap_s[0] == Approx(x.step(100, 3) / 4).epsilon(1e-12));
  }
}

TEST_CASE("speculative decoding is refused where it is not modelled, and its settings are bounded") {
  const Lone x;
  ServingConfig c = speculating(3, 0.8);
  c.pp = 2;
  CHECK(bad_input([&] { simulate_serving(x.model, x.cluster, x.cost, c, {{0.0, 10, 4}}); }) ==
        "--speculative-tokens with --pp 2: speculative decoding is modelled on one pipeline stage; use --pp 1 (replicas "
        "or a wider tp for more GPUs)");
  c = speculating(kMaxSpeculativeTokens + 1, 0.8);
  CHECK(bad_input([&] { simulate_serving(x.model, x.cluster, x.cost, c, {{0.0, 10, 4}}); }) ==
        "--speculative-tokens: must be from 0 to 16, got 17");
  c = speculating(3, 1.5);
  CHECK(bad_input([&] { simulate_serving(x.model, x.cluster, x.cost, c, {{0.0, 10, 4}}); }) ==
        "--acceptance-rate: must be in (0, 1], got 1.5");
}

TEST_CASE("speculative decoding with data-parallel attention: the draft's K lockstep steps before each verification") {
  const Model moe = model_preset("qwen3-30b-a3b");
  const Cluster cluster = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  const ServingConfig c = speculating(3, 1.0);  // every drafted token accepted: 4 tokens a step
  // One request on the first of two engines: its prefill, then decode steps of 4 positions each, every one after the
  // draft's 3 steps at its one verifying decode.
  const ServingResult r = simulate_dp_attention(moe, cluster, cost, c, 2, {{0.0, 100, 9}});
  ServingConfig lockstep = c;
  lockstep.ep = 2;
  ServingBatch prefill;
  prefill.prefill_tokens = 100;
  prefill.prefill_sequences = 1;
  prefill.prefill_pairs = 100.0 * 101 / 2;
  prefill.prefill_kv_reads = 100;
  prefill.sampled_tokens = 1;
  const double first = dp_attention_step_time(moe, cluster, cost, lockstep, {prefill, ServingBatch{}});
  CHECK(r.requests[0].first_token_s == Approx(first).epsilon(1e-12));
  // Tokens 2 to 9: two verification steps of 4 (after 100 and 104 cached positions).
  double last = first;
  for (long cached : {100L, 104L}) {
    const ServingStep step{{0, cached, 4, true, true}};
    const ServingBatch verify = serving_batch(step);
    const ServingBatch draft = draft_batch(step);
    CHECK(draft.decode_tokens == 1);
    CHECK(draft.decode_context == cached + 1);
    const double with_drafts = dp_attention_step_time(moe, cluster, cost, lockstep, {verify, ServingBatch{}}, {draft, ServingBatch{}});
    const double without = dp_attention_step_time(moe, cluster, cost, lockstep, {verify, ServingBatch{}});
    CHECK(with_drafts > without);
    last += with_drafts;
  }
  CHECK(r.requests[0].last_token_s == Approx(last).epsilon(1e-12));
  // The draft: 3 x (the last block, whose experts the two engines' GPUs hold, its exchange, and the head).
  const ServingStep step{{0, 100, 4, true, true}};
  const ServingBatch draft = draft_batch(step);
  ServingConfig no_drafts = lockstep;
  no_drafts.speculative_tokens = 0;
  const double drafts = dp_attention_step_time(moe, cluster, cost, lockstep, {serving_batch(step), ServingBatch{}}, {draft, ServingBatch{}}) -
                        dp_attention_step_time(moe, cluster, cost, no_drafts, {serving_batch(step), ServingBatch{}}, {draft, ServingBatch{}});
  const ServingExperts experts{2, 1, 0};
  const Layer& block = moe.layers[moe.layers.size() - 2];
  const Layer& head = moe.layers.back();
  REQUIRE(block.kind == LayerKind::Block);
  REQUIRE(head.kind == LayerKind::Head);
  const auto layer_s = [&](const Layer& l, const ServingBatch& b) {
    return cost.serving_time(l, serving_layer_work(moe, l, 1, b, KvCacheDtype::Bf16, ServingWeights::Bf16, experts),
                             cluster.gpu, cluster.intra_node, 1);
  };
  ParallelConfig pc;
  pc.dp = 2;
  pc.ep = 2;
  const AllToAllLinks links = all_to_all_links(cluster, pc, 0);
  const TransformerConfig& t = *moe.transformer;
  const double copies = 1.0 * t.moe->top_k * t.hidden;
  const RoutedDispatch low_latency{t.moe->experts, t.moe->top_k, false, t.moe->groups, t.moe->top_groups, 1, static_cast<int>(t.hidden),
                                   DeepEpKernels::LowLatency};
  const double exchange = cost.all_to_all_time(2 * copies, links, low_latency) + cost.all_to_all_time(2 * copies, links, low_latency);
  const double one = std::max(layer_s(block, draft), layer_s(block, ServingBatch{})) + exchange +
                     std::max(layer_s(head, draft), layer_s(head, ServingBatch{}));
  CHECK(drafts == Approx(3 * one).epsilon(1e-9));
}
