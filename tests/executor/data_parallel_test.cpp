// Data-parallel replicas of a pipeline, and routed experts spread over them (expert parallelism): trained
// for real, they follow a single rank that trains sequentially on all the replicas' micro-batches; the
// replicas' copies stay bit-identical; each expert lives on its ep group member and gets the whole gradient.
#include <catch2/catch.hpp>

#include <map>

#include "core/error.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/runtime.hpp"
#include "executor_test_util.hpp"

using namespace pw;

namespace {


struct Trained {
  std::vector<double> losses;
  std::map<std::string, Mat> values;  // every replica's parameters, by name (equal copies checked on the way)
  std::map<std::string, int> holders;  // how many replicas hold each parameter
};

// `dp` replicas of `schedule` over `ranges`, experts over `ep` of them, `iterations` optimizer steps.
Trained train(const Model& model, const std::vector<LayerRange>& ranges, const Schedule& schedule, int dp, int ep,
              int iterations, const OptimizerConfig& optimizer) {
  CpuBackendConfig config;
  config.seed = 9;
  config.micro_batch_size = 2;
  config.optimizer = optimizer;
  config.replicas = dp;
  config.ep = ep;
  CpuBackend backend(model, ranges, config);
  RunOptions options;
  options.iterations = iterations;
  options.timeout_s = 30;
  options.replicas = dp;
  const RunResult result = run_schedule(schedule, backend, options);
  CHECK(result.iterations.front().ranks.size() == static_cast<size_t>(schedule.num_ranks() * dp));
  Trained t;
  t.losses = backend.losses();
  for (int d = 0; d < dp; ++d)
    for (Param* p : backend.model(d).params()) {
      INFO(p->name << " of replica " << d);
      auto [it, first] = t.values.emplace(p->name, p->value);
      if (!first) CHECK(it->second == p->value);  // bit for bit
      ++t.holders[p->name];
    }
  return t;
}

// One rank training on all `count` micro-batches of each iteration.
Trained train_sequentially(const Model& model, int count, int iterations, const OptimizerConfig& optimizer) {
  CpuModel m(model, 9);
  Trained t;
  for (int it = 0; it < iterations; ++it) {
    std::vector<MicroBatch> data;
    for (int i = 0; i < count; ++i)
      data.push_back(synthetic_microbatch(9, it, i, 2, model.transformer->max_seq_len, model.transformer->vocab));
    t.losses.push_back(test::reference_iteration(m, data));
    optimizer_step(optimizer, m.params());
  }
  for (Param* p : m.params()) t.values.emplace(p->name, p->value);
  return t;
}

void check_same_training(const Trained& got, const Trained& want) {
  REQUIRE(got.losses.size() == want.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i) CHECK(got.losses[i] == Approx(want.losses[i]).epsilon(1e-5));
  REQUIRE(got.values.size() == want.values.size());
  for (const auto& [name, value] : want.values) {
    INFO(name);
    REQUIRE(got.values.count(name) == 1);
    CHECK(test::relative(got.values.at(name), value) < 2e-5);
  }
}

const std::vector<LayerRange> kTwoStages = {{0, 2}, {3, 4}};  // embedding + 2 blocks | block + head

}  // namespace

TEST_CASE("dp 2 x pp 2: one SGD step moves every weight by the sequential run's gradient over all micro-batches") {
  // SGD with lr 1: the step is the gradient itself, averaged over the replicas.
  const OptimizerConfig sgd{OptimizerKind::Sgd, 1.0};
  const Model model = test::tiny_llama(3);
  const Trained got = train(model, kTwoStages, test::schedule_of("1f1b", 2, 4), 2, 1, 1, sgd);
  check_same_training(got, train_sequentially(model, 8, 1, sgd));
  for (const auto& [name, n] : got.holders) CHECK(n == 2);
}

// Adam runs on Llama-style models: a GPT block's key bias has a gradient of zero up to rounding (softmax
// ignores what it adds to every key alike), and Adam scales that rounding, which depends on the order of
// the sums, up to full steps. SGD checks the GPT-style ones.
TEST_CASE("dp 3 x pp 2 with zb-h1 (W apart): three Adam steps follow sequential training") {
  const OptimizerConfig adam{OptimizerKind::Adam, 1e-2};
  const Model model = test::tiny_llama(3);
  check_same_training(train(model, kTwoStages, test::schedule_of("zb-h1", 2, 4), 3, 1, 3, adam),
                      train_sequentially(model, 12, 3, adam));
}

TEST_CASE("MoE, dp 2 x ep 2 x pp 2: each replica holds half the experts, and training follows the sequential run") {
  const Model model = test::tiny_moe(3);
  for (const OptimizerConfig& opt : {OptimizerConfig{OptimizerKind::Sgd, 1.0}, OptimizerConfig{OptimizerKind::Adam, 1e-2}}) {
    const int steps = opt.kind == OptimizerKind::Sgd ? 1 : 3;
    const Trained got = train(model, kTwoStages, test::schedule_of("1f1b", 2, 4), 2, 2, steps, opt);
    check_same_training(got, train_sequentially(model, 8, steps, opt));
    for (const auto& [name, n] : got.holders) {
      INFO(name);
      CHECK(n == (name.find(".expert") != std::string::npos ? 1 : 2));
    }
  }
}

TEST_CASE("MoE, dp 4 x ep 2 (expert dp 2): zb-h1's deferred W, interleaved stages, GELU experts with biases") {
  const OptimizerConfig sgd{OptimizerKind::Sgd, 1.0}, adam{OptimizerKind::Adam, 1e-2};
  const Model gpt = test::tiny_moe(3, /*gpt=*/true);
  const Trained zb = train(gpt, kTwoStages, test::schedule_of("zb-h1", 2, 4), 4, 2, 1, sgd);
  check_same_training(zb, train_sequentially(gpt, 16, 1, sgd));
  for (const auto& [name, n] : zb.holders) CHECK(n == (name.find(".expert") != std::string::npos ? 2 : 4));

  // 4 stages over 2 ranks, each block a stage of its own.
  const Model llama = test::tiny_moe(4);
  const std::vector<LayerRange> four = {{0, 1}, {2, 2}, {3, 3}, {4, 5}};
  check_same_training(train(llama, four, test::schedule_of("interleaved", 2, 4), 4, 2, 2, adam),
                      train_sequentially(llama, 16, 2, adam));
}

TEST_CASE("MoE with ep over replicas: recomputation exchanges the tokens again and keeps the gradients") {
  const OptimizerConfig sgd{OptimizerKind::Sgd, 1.0};
  const Model model = test::tiny_moe(3);
  for (Recompute r : {Recompute::Selective, Recompute::Full}) {
    INFO(to_string(r));
    CpuBackendConfig config;
    config.seed = 9;
    config.micro_batch_size = 2;
    config.optimizer = sgd;
    config.replicas = 2;
    config.ep = 2;
    config.recompute = r;
    CpuBackend backend(model, kTwoStages, config);
    RunOptions options;
    options.replicas = 2;
    options.timeout_s = 30;
    run_schedule(test::schedule_of("1f1b", 2, 4), backend, options);
    const Trained want = train_sequentially(model, 8, 1, sgd);
    for (int d = 0; d < 2; ++d)
      for (Param* p : backend.model(d).params()) {
        INFO(p->name);
        CHECK(test::relative(p->value, want.values.at(p->name)) < 2e-5);
      }
  }
}

TEST_CASE("data parallelism and ep: bad configurations are refused before anything runs") {
  CpuBackendConfig config;
  config.replicas = 3;
  config.ep = 2;
  CHECK_THROWS_WITH(CpuBackend(test::tiny_moe(3), kTwoStages, config),
                    "--ep: 2 does not divide --dp 3; the cpu backend spreads the experts over data-parallel replicas, "
                    "so use a divisor of 3");
  config.replicas = 6;
  config.ep = 3;
  CHECK_THROWS_WITH(CpuBackend(test::tiny_moe(3), kTwoStages, config),
                    "--ep: 3 does not divide the 4 experts of 'test-llama-moe'; use a divisor of 4");
  config.replicas = 2;
  config.ep = 2;
  CHECK_THROWS_WITH(CpuBackend(test::tiny_llama(3), kTwoStages, config),
                    "--ep: model 'test-llama' has no routed experts to spread; use --ep 1");
  // The runtime and the backend must agree on the replicas.
  config.ep = 1;
  CpuBackend backend(test::tiny_llama(3), kTwoStages, config);
  RunOptions options;
  options.replicas = 1;
  CHECK_THROWS_WITH(run_schedule(test::schedule_of("1f1b", 2, 4), backend, options),
                    Catch::Contains("cpu backend: built for 2 replicas, run with 1"));
  options.replicas = 0;
  CHECK_THROWS_WITH(run_schedule(test::schedule_of("1f1b", 2, 4), backend, options), "--dp: must be at least 1, got 0");
}
