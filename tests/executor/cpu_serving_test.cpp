// Serving on the CPU backend (executor/cpu_serving.hpp): the cached forward computes what the training
// forward computes, chunk by chunk and sequence by sequence; whole runs of the simulator's batches give the
// greedy tokens of a decode without any cache, however the batches were formed.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/error.hpp"
#include "executor/cpu_model.hpp"
#include "executor/cpu_serving.hpp"
#include "executor_test_util.hpp"

using namespace pw;

namespace {

// The hidden states after the last block for one batch of chunks, through `cache`.
Mat serve_blocks(CpuModel& m, const ServingStep& step, const std::vector<std::vector<int>>& seqs, CpuKvCache& cache,
                 const std::vector<long>& capacity) {
  ServeInput in;
  in.step = &step;
  in.cache = &cache;
  in.capacity = &capacity;
  for (const SequenceChunk& c : step)
    for (long i = c.start; i < c.start + c.tokens; ++i) {
      in.tokens.push_back(seqs[static_cast<size_t>(c.request)][static_cast<size_t>(i)]);
      in.positions.push_back(i);
    }
  return m.serve(LayerRange{0, m.num_layers() - 2}, Mat(), in);
}

// The training forward's hidden states after the last block for one sequence.
Mat train_blocks(CpuModel& m, const std::vector<int>& seq) {
  MicroBatch mb;
  mb.batch = 1;
  mb.seq = static_cast<int>(seq.size());
  mb.tokens = seq;
  mb.targets = seq;
  StageContext ctx;
  return m.forward(LayerRange{0, m.num_layers() - 2}, Mat(), mb, ctx);
}

// Greedy decoding without a cache: each next token from a forward over the whole sequence so far.
std::vector<int> uncached_greedy(CpuModel& m, std::vector<int> seq, long outputs) {
  std::vector<int> out;
  const std::vector<long> capacity{static_cast<long>(seq.size()) + outputs};
  for (long g = 0; g < outputs; ++g) {
    CpuKvCache fresh;
    const ServingStep step{{0, 0, static_cast<long>(seq.size()), true}};
    ServeInput in;
    in.step = &step;
    in.cache = &fresh;
    in.capacity = &capacity;
    in.tokens = seq;
    for (long i = 0; i < static_cast<long>(seq.size()); ++i) in.positions.push_back(i);
    Eigen::Index best = 0;
    m.serve(LayerRange{0, m.num_layers() - 1}, Mat(), in).row(0).maxCoeff(&best);
    seq.push_back(static_cast<int>(best));
    out.push_back(static_cast<int>(best));
  }
  return out;
}

// The bf16 weights of a stage, as the simulator counts them.
double weight_bytes(const Model& model, const LayerRange& stage) {
  double total = 0;
  for (int i = stage.first; i <= stage.last; ++i) {
    const Layer& l = model.layers[static_cast<size_t>(i)];
    total += layer_parameters(*model.transformer, l.kind, l.block, 1).total() * 2;
  }
  return total;
}

}  // namespace

TEST_CASE("the cached serving forward computes the training forward, chunk by chunk and sequence by sequence") {
  for (const Model& model : {test::tiny_llama(), test::tiny_gpt(), test::tiny_moe()}) {
    INFO(model.name);
    CpuModel m(model, 5);
    const std::vector<std::vector<int>> seqs{{3, 1, 4, 1, 5, 9, 2, 6}, {2, 7, 1, 8, 2, 8, 1, 8}};
    const std::vector<long> capacity{8, 8};
    const Mat expect0 = train_blocks(m, seqs[0]), expect1 = train_blocks(m, seqs[1]);

    CpuKvCache whole;
    const Mat both = serve_blocks(m, {{0, 0, 8, false}, {1, 0, 8, false}}, seqs, whole, capacity);
    CHECK((both.topRows(8) - expect0).cwiseAbs().maxCoeff() < 1e-5);
    CHECK((both.bottomRows(8) - expect1).cwiseAbs().maxCoeff() < 1e-5);

    // Sequence 0 in chunks of 3, 4 and 1 beside sequence 1's prefill and then its decodes.
    CpuKvCache chunked;
    const Mat a = serve_blocks(m, {{0, 0, 3, false}, {1, 0, 6, false}}, seqs, chunked, capacity);
    const Mat b = serve_blocks(m, {{1, 6, 1, true}, {0, 3, 4, false}}, seqs, chunked, capacity);
    const Mat c = serve_blocks(m, {{0, 7, 1, true}, {1, 7, 1, true}}, seqs, chunked, capacity);
    CHECK((a.topRows(3) - expect0.topRows(3)).cwiseAbs().maxCoeff() < 1e-5);
    CHECK((b.bottomRows(4) - expect0.middleRows(3, 4)).cwiseAbs().maxCoeff() < 1e-5);
    CHECK((c.topRows(1) - expect0.bottomRows(1)).cwiseAbs().maxCoeff() < 1e-5);
    CHECK((a.bottomRows(6) - expect1.topRows(6)).cwiseAbs().maxCoeff() < 1e-5);
    CHECK((b.topRows(1) - expect1.row(6)).cwiseAbs().maxCoeff() < 1e-5);
    CHECK((c.bottomRows(1) - expect1.row(7)).cwiseAbs().maxCoeff() < 1e-5);
  }
}

TEST_CASE("serving runs give the uncached greedy tokens: whole or chunked prefill, one stage or two, preempted or not") {
  const Model model = test::tiny_llama(4);
  const Cluster cluster = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  std::vector<ServingRequest> requests;
  for (long r = 0; r < 6; ++r) requests.push_back({0.0, 5 + r % 3, 4 + r % 2});
  CpuModel reference(model, 9);
  std::vector<std::vector<int>> expected;
  for (size_t r = 0; r < requests.size(); ++r)
    expected.push_back(uncached_greedy(
        reference, serving_prompt(9, static_cast<long>(r), requests[r].prompt_tokens, model.transformer->vocab),
        requests[r].output_tokens));

  struct Case {
    int pp;
    long budget;
    bool tight_cache;
  };
  for (const Case& k : {Case{1, 64, false}, Case{1, 3, false}, Case{2, 4, false}, Case{1, 64, true}, Case{2, 64, true}}) {
    INFO("pp " << k.pp << ", budget " << k.budget << (k.tight_cache ? ", a 5-page cache" : ""));
    ServingConfig c;
    c.pp = k.pp;
    c.max_num_batched_tokens = k.budget;
    c.block_tokens = 4;
    c.concurrency = 4;
    c.record_steps = true;
    if (k.tight_cache) {
      // Room for 4.5 pages of 4 tokens on the tightest stage: 4 requests of up to 11 tokens must take turns.
      for (const LayerRange& stage : split_layers(model, k.pp, {})) {
        const double per_token = kv_bytes_for_tokens(model, stage, 1, 1, KvCacheDtype::Bf16);
        c.activation_reserve_bytes = std::max(c.activation_reserve_bytes, cluster.memory_capacity_at(0) * c.gpu_memory_utilization -
                                                                              weight_bytes(model, stage) - 18 * per_token);
      }
    }
    const ServingResult sim = simulate_serving(model, cluster, cost, c, requests);
    if (k.tight_cache) CHECK(sim.preemptions > 0);
    const CpuServingRun run = serve_on_cpu(model, split_layers(model, k.pp, {}), sim.steps, requests, c.concurrency, 9);
    CHECK(run.outputs == expected);
    CHECK(run.measured.batches == static_cast<long>(sim.steps.size()));
    REQUIRE(run.measured.stage_busy_s.size() == static_cast<size_t>(k.pp));
    for (double busy : run.measured.stage_busy_s) CHECK(busy > 0);
    for (size_t r = 0; r < requests.size(); ++r) {
      const ServedRequest& s = run.measured.requests[r];
      CHECK(s.output_tokens == requests[r].output_tokens);
      CHECK(s.arrival_s <= s.first_token_s);
      CHECK(s.first_token_s <= s.last_token_s);
      CHECK(s.last_token_s <= run.measured.makespan_s);
    }
    // The closed loop: the first 4 start at once, each later one when an earlier one finished.
    CHECK(run.measured.requests[3].arrival_s == 0);
    CHECK(run.measured.requests[4].arrival_s > 0);
  }
}

TEST_CASE("a serving run refuses batches that do not fit its requests, and learned positions it does not have") {
  const Model model = test::tiny_llama();
  const std::vector<ServingRequest> requests{{0.0, 4, 2}};
  const std::vector<LayerRange> stages{{0, model.num_layers() - 1}};
  CHECK_THROWS_WITH(serve_on_cpu(model, stages, {{{0, 3, 3, true}}}, requests, 1, 1),
                    "serving steps: batch 0 computes positions 3 to 5 of request 0, which has 5");
  CHECK_THROWS_WITH(serve_on_cpu(model, stages, {{{1, 0, 4, true}}}, requests, 1, 1),
                    "serving steps: batch 0 names request 1 of 1");
  const Model gpt = test::tiny_gpt();
  CHECK_THROWS_WITH(serve_on_cpu(gpt, {{0, gpt.num_layers() - 1}}, {}, {{0.0, 6, 4}}, 1, 1),
                    "request 0: 6 prompt and 4 output tokens pass the 8 positions 'test-gpt' learned; use shorter requests");
}

TEST_CASE("a stage hand-over is timed as the runtime makes it: positive, and under a second") {
  const double t = stage_handover_s(50);
  CHECK(t > 0);
  // A thread's wake-up on a loaded VM can take milliseconds; a hand-over beyond a second is a broken queue.
  CHECK(t < 1.0);
}
