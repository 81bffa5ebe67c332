// The key check: every schedule, run for real over p ranks with uneven stages, computes the loss and the
// gradients of a single-rank sequential run of the same micro-batches; also with tied embeddings and with
// recomputation, whose pipelined runs are held to the plain sequential one.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "core/error.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/runtime.hpp"
#include "executor_test_util.hpp"
#include "schedules/generators.hpp"
#include "schedules/pytorch_csv.hpp"
#include "../error_text.hpp"

using namespace pw;

namespace {

// The first micro-batch count the schedule accepts among 2p, 3p, 4p (dualpipev needs m >= 2p, interleaved a
// multiple of its group size).
Schedule schedule_for(const std::string& name, int p) {
  for (int m : {2 * p, 3 * p, 4 * p}) {
    ScheduleSpec spec;
    spec.name = name;
    spec.ranks = p;
    spec.microbatches = m;
    spec.chunks = chunks_per_rank(name, 2);
    try {
      return make_schedule(spec);
    } catch (const Error&) {
    }
  }
  FAIL("schedule " << name << " accepts none of 2p, 3p, 4p micro-batches for p = " << p);
  return {};
}

// Uneven stages over stages + 3 layers: the first stage holds the embedding and two blocks, the last a block
// and the head, the others one block each.
std::vector<LayerRange> uneven_ranges(int stages) {
  std::vector<LayerRange> r;
  int next = 0;
  for (int s = 0; s < stages; ++s) {
    const int size = s == 0 ? 3 : s == stages - 1 ? 2 : 1;
    r.push_back({next, next + size - 1});
    next += size;
  }
  return r;
}


// The Llama-style test model with its LM head tied to the token embedding.
Model tied_llama(int layers) {
  TransformerConfig c = *test::tiny_llama(layers).transformer;
  c.tied_embeddings = true;
  return make_transformer_model("test-llama-tied", c);
}

// `recompute`: of the pipelined run only; the reference keeps every activation.
void check_against_sequential(const Model& model, const Schedule& schedule, Recompute recompute = Recompute::None) {
  const int m = schedule.microbatches;
  CpuBackendConfig config;
  config.micro_batch_size = 2;
  config.seed = 5;
  config.recompute = recompute;
  CpuBackend backend(model, uneven_ranges(schedule.num_stages()), config);
  RunOptions options;
  options.optimizer_step = false;
  options.timeout_s = 20;
  run_schedule(schedule, backend, options);

  CpuModel reference(model, config.seed);
  std::vector<MicroBatch> data;
  for (int i = 0; i < m; ++i)
    data.push_back(synthetic_microbatch(config.seed, 0, i, config.micro_batch_size, model.transformer->max_seq_len,
                                        model.transformer->vocab));
  const double want_loss = test::reference_iteration(reference, data);

  INFO("schedule " << schedule.name << ", p = " << schedule.num_ranks() << ", m = " << m << ", model " << model.name
                    << ", recompute " << to_string(recompute));
  REQUIRE(backend.losses().size() == 1);
  CHECK(std::abs(backend.losses()[0] - want_loss) <= 1e-5 * std::abs(want_loss));
  const std::vector<Param*> got = backend.model().params(), want = reference.params();
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO(got[k]->name);
    CHECK(test::relative(got[k]->grad, want[k]->grad) < 1e-5);
  }
}

}  // namespace

TEST_CASE("every schedule gives the loss and gradients of a sequential run (p = 2, 3, 4, uneven stages)") {
  for (const std::string& name : schedule_names())
    for (int p : {2, 3, 4}) {
      if (model_copies(name) > 1) continue;  // the executor holds one copy of the model (refused, below)
      const Schedule schedule = schedule_for(name, p);
      const int blocks = schedule.num_stages() + 1;
      check_against_sequential(p % 2 == 0 ? test::tiny_llama(blocks) : test::tiny_gpt(blocks), schedule);
    }
}

TEST_CASE("the executor refuses bidirectional DualPipe before it runs anything: it holds one copy of the model") {
  const Schedule schedule = make_schedule({"dualpipe", 2, 4});
  CpuBackendConfig config;
  CpuBackend backend(test::tiny_llama(3), uneven_ranges(2), config);
  CHECK(bad_input([&] { run_schedule(schedule, backend, RunOptions{}); }) ==
        "--schedule: dualpipe runs 2 copies of the model, and the executor holds one copy of each stage's layers on a "
        "rank; run dualpipev, its one-copy V form");
}

TEST_CASE("training steps on ranks match sequential training (1f1b over 3 ranks, 3 Adam iterations)") {
  const Model model = test::tiny_gpt(4);
  ScheduleSpec spec{"1f1b", 3, 4};
  CpuBackendConfig config;
  config.seed = 8;
  config.optimizer = OptimizerConfig{OptimizerKind::Adam, 1e-2};
  CpuBackend backend(model, uneven_ranges(3), config);
  RunOptions options;
  options.warmup = 1;
  options.iterations = 2;
  run_schedule(make_schedule(spec), backend, options);

  CpuModel reference(model, config.seed);
  for (int it = 0; it < 3; ++it) {
    std::vector<MicroBatch> data;
    for (int i = 0; i < 4; ++i) data.push_back(synthetic_microbatch(config.seed, it, i, 1, 8, 32));
    const double loss = test::reference_iteration(reference, data);
    optimizer_step(config.optimizer, reference.params());
    CHECK(backend.losses()[static_cast<size_t>(it)] == Approx(loss).epsilon(1e-5));
  }
  const std::vector<Param*> got = backend.model().params(), want = reference.params();
  for (size_t k = 0; k < got.size(); ++k) {
    INFO(got[k]->name);
    CHECK(test::relative(got[k]->value, want[k]->value) < 1e-5);
  }
  CHECK(backend.losses()[2] < backend.losses()[0]);
}

TEST_CASE("tied embeddings: every schedule gives each copy the gradient of the sequential run (p = 2, 3)") {
  // Each copy's gradient is its own use's; the optimizer step adds them (next test).
  for (const std::string& name : schedule_names())
    for (int p : {2, 3}) {
      if (model_copies(name) > 1) continue;
      const Schedule schedule = schedule_for(name, p);
      check_against_sequential(tied_llama(schedule.num_stages() + 1), schedule);
    }
}

TEST_CASE("recomputation: every schedule gives the loss and gradients of the sequential run (p = 2, 3)") {
  for (Recompute r : {Recompute::Selective, Recompute::Full})
    for (const std::string& name : schedule_names())
      for (int p : {2, 3}) {
        if (model_copies(name) > 1) continue;
        const Schedule schedule = schedule_for(name, p);
        const int blocks = schedule.num_stages() + 1;
        check_against_sequential(p % 2 == 0 ? test::tiny_llama(blocks) : test::tiny_gpt(blocks), schedule, r);
      }
}

TEST_CASE("tied embeddings: training on ranks matches sequential training, and the two copies stay equal") {
  // 1f1b over 3 ranks: the embedding (rank 0) and the head (rank 2) meet to add their gradients; zb-v over 2
  // ranks places stage 0 and the last stage on rank 0, which adds them itself. With full recomputation too.
  struct Case {
    std::string schedule;
    int ranks;
    Recompute recompute;
  };
  for (const Case& c : {Case{"1f1b", 3, Recompute::None}, Case{"zb-v", 2, Recompute::None},
                        Case{"1f1b", 3, Recompute::Full}}) {
    const Schedule schedule = schedule_for(c.schedule, c.ranks);
    const Model model = tied_llama(schedule.num_stages() + 1);
    const int m = schedule.microbatches;
    CpuBackendConfig config;
    config.seed = 8;
    config.optimizer = OptimizerConfig{OptimizerKind::Adam, 1e-2};
    config.recompute = c.recompute;
    CpuBackend backend(model, uneven_ranges(schedule.num_stages()), config);
    RunOptions options;
    options.warmup = 1;
    options.iterations = 2;
    options.timeout_s = 20;
    run_schedule(schedule, backend, options);

    INFO(c.schedule << " over " << c.ranks << " ranks, recompute " << to_string(c.recompute));
    CpuModel reference(model, config.seed);
    for (int it = 0; it < 3; ++it) {
      std::vector<MicroBatch> data;
      for (int i = 0; i < m; ++i) data.push_back(synthetic_microbatch(config.seed, it, i, 1, 8, 32));
      const double loss = test::reference_iteration(reference, data);
      reference.sum_tied_gradients();
      optimizer_step(config.optimizer, reference.params());
      CHECK(backend.losses()[static_cast<size_t>(it)] == Approx(loss).epsilon(1e-5));
    }
    const std::vector<Param*> got = backend.model().params(), want = reference.params();
    for (size_t k = 0; k < got.size(); ++k) {
      INFO(got[k]->name);
      CHECK(test::relative(got[k]->value, want[k]->value) < 1e-5);
    }
    // The same summed gradient and the same Adam state on both copies: equal to the last bit.
    const Mat head_as_table = backend.model().tied_head()->value.transpose();
    CHECK(backend.model().tied_table()->value == head_as_table);
    CHECK(backend.losses()[2] < backend.losses()[0]);
  }
}

TEST_CASE("PyTorch's lowered ZB1P artifact runs with its receives posted early: the compute-only file's loss and gradients") {
  const auto load = [](const std::string& name) {
    std::ifstream in(std::string(PIPEWRIGHT_SOURCE_DIR) + "/tests/schedules/pytorch_artifacts/" + name);
    REQUIRE(in);
    return schedule_from_pytorch_csv(std::string(std::istreambuf_iterator<char>(in), {}), name);
  };
  const Model model = test::tiny_llama(4);
  const std::vector<LayerRange> ranges = {{0, 1}, {2, 2}, {3, 3}, {4, 5}};
  std::vector<double> losses;
  std::vector<std::vector<Mat>> grads;
  for (const std::string name : {"zb1p_2rank_2stagep_compute.csv", "zb1p_2rank_2stagep_comms.csv"}) {
    CpuBackendConfig config;
    config.seed = 5;
    CpuBackend backend(model, ranges, config);
    RunOptions options;
    options.optimizer_step = false;
    options.timeout_s = 20;
    run_schedule(load(name), backend, options);
    losses.push_back(backend.losses().at(0));
    grads.emplace_back();
    for (Param* p : backend.model().params()) grads.back().push_back(p->grad);
  }
  // The same compute order, the same floats.
  CHECK(losses[0] == losses[1]);
  CHECK(grads[0] == grads[1]);
  check_against_sequential(test::tiny_llama(5), load("zb1p_2rank_2stagep_comms.csv"));
}
