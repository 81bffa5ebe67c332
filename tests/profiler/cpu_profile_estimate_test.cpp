// What `profile` on the CPU takes, estimated before anything is allocated: the repetition rules' runs at a
// given core speed in closed form, and the refusals a user sees.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "../cli/cli_test_util.hpp"
#include "../error_text.hpp"
#include "../executor/executor_test_util.hpp"
#include "core/kept_bytes.hpp"
#include "core/layer_work.hpp"
#include "executor/cpu_layers.hpp"
#include "executor/cpu_model.hpp"
#include "profiler/core_speed.hpp"
#include "profiler/cpu_profile_estimate.hpp"
#include "profiler/cpu_profiler.hpp"

using namespace pw;

namespace {

// A core of `flops` FLOP/s whose random draws take no time (the cases that count them say so).
CoreSpeed at(double flops) { return CoreSpeed{flops, 1e300}; }

double model_flops(const Model& m, int b, int seq) {
  Workload w;
  w.micro_batch_size = b;
  w.seq_len = seq;
  return model_flops_per_microbatch(m, w);
}

double parameters_of(const Model& m) {
  double n = 0;
  for (const Layer& l : m.layers) n += layer_work(m, l, Workload{}).parameters;
  return n;
}

}  // namespace

TEST_CASE("cpu profile estimate: the repetition rules' runs of every layer at the core's speed") {
  const Model llama = model_preset("llama3-8b");
  CpuProfileRequest r;
  r.micro_batch_sizes = {1, 2};
  r.seq_len = 256;
  r.options.min_time_s = 0;  // the counts alone: 3 warm-up, 1 untimed in each of 5 rounds, 10 timed
  const std::vector<WorkEstimate> parts = cpu_profile_estimate(llama, r, at(1e10));
  REQUIRE(parts.size() == 2);
  const Model one = one_block_per_kind(llama);
  // F + B + W of every layer is the model's FLOPs of a micro-batch (backward twice forward).
  const double flops = model_flops(one, 1, 256) + model_flops(one, 2, 256);
  CHECK(parts[1].seconds == Approx(18 * flops / 1e10).epsilon(1e-12));
  CHECK(parts[1].work == fmt::format("initialising {:.3g} parameters and 18 or more runs of F, B and W of the embedding, one block and the head of llama3-8b at "
                                     "micro-batch sizes 1, 2 and 256 tokens ({:.3g} FLOPs a run, at the 10.0 GFLOP/s of one "
                                     "core here)",
                                     parameters_of(one), flops));
  CHECK(parts[1].fix == "lower --seq-len or --micro-batch-size, or profile with --backend cuda");
  // Twice the speed, half the time; twice the timed runs, (3 + 5 + 20) / 18 of it.
  CHECK(cpu_profile_estimate(llama, r, at(2e10))[1].seconds == Approx(parts[1].seconds / 2).epsilon(1e-12));
  r.options.min_repetitions = 20;
  CHECK(cpu_profile_estimate(llama, r, at(1e10))[1].seconds == Approx(parts[1].seconds * 28 / 18).epsilon(1e-12));
  // Every parameter is drawn first: at a million draws a second, that many seconds more.
  CHECK(cpu_profile_estimate(llama, r, CoreSpeed{1e10, 1e6})[1].seconds ==
        Approx(parts[1].seconds * 28 / 18 + parameters_of(one) / 1e6).epsilon(1e-12));
}

TEST_CASE("cpu profile estimate: timed runs go on to the minimum time, unless the most runs come first") {
  CpuProfileRequest r;  // 0.2 s per layer and size, at most 1000 timed runs
  r.seq_len = 8;
  r.options.warmup = 0;
  r.options.rounds = 1;
  r.options.min_repetitions = 1;
  const Model tiny = test::tiny_llama();
  // A pass runs the embedding, copies of the block (all 3 of the model's, a few kB each) and the head.
  REQUIRE(pass_copies(tiny, 1, 8) == 3);
  const Model pass = blocks_per_kind_copies(tiny, 3);
  // At 1 FLOP/s every pass is longer than 0.2 s: one timed pass.
  CHECK(cpu_profile_estimate(tiny, r, at(1))[1].seconds == Approx(model_flops(pass, 1, 8)).epsilon(1e-12));
  // At 1 TFLOP/s 1000 passes of these few kFLOPs are shorter than 0.2 s: the count ends them.
  CHECK(cpu_profile_estimate(tiny, r, at(1e12))[1].seconds == Approx(1000 * model_flops(pass, 1, 8) / 1e12).epsilon(1e-12));
  // In between, the minimum time: 0.2 s of passes.
  const double flops = model_flops(pass, 1, 8);
  const double between = cpu_profile_estimate(tiny, r, at(flops * 100))[1].seconds;  // each pass below 0.01 s
  CHECK(between == Approx(0.2).epsilon(1e-12));
  // Two micro-batch sizes: a pass each.
  r.micro_batch_sizes = {1, 2};
  CHECK(cpu_profile_estimate(tiny, r, at(1))[1].seconds ==
        Approx(model_flops(pass, 1, 8) + model_flops(pass, 2, 8)).epsilon(1e-12));
}

TEST_CASE("cpu profile estimate: the memory of the one-block model's tensors") {
  const Model llama = model_preset("llama3-70b");
  const Model one = one_block_per_kind(llama);
  const double parameters = parameters_of(one);
  CpuProfileRequest r;
  const WorkEstimate memory = cpu_profile_estimate(llama, r, at(1e10))[0];
  CHECK(memory.work == fmt::format("the float32 tensors of the embedding, one block and the head of llama3-70b at "
                                   "micro-batch size 1 and 8192 tokens ({:.3g} parameters with their gradients)",
                                   parameters));
  // Weights and gradients, 256 MiB of optimizer state, the 64 MiB written before each timed optimizer step, and
  // the inputs and activations on top: at 8192 tokens the block's softmax (64 heads x 8192^2 floats, 17 GB)
  // and the head's probabilities; at 8 next to nothing.
  const double fixed = 256.0 * 1024 * 1024 + 64.0 * 1024 * 1024;
  CHECK(memory.bytes > 8 * parameters + fixed + 17e9);
  r.seq_len = 8;
  CHECK(cpu_profile_estimate(llama, r, at(1e10))[0].bytes == Approx(8 * parameters + fixed).epsilon(1e-3));
}

TEST_CASE("cpu profile estimate: a model the CPU backend cannot run is refused as before") {
  Model m = test::tiny_llama();
  m.transformer.reset();
  const std::string refused = bad_input([&] { cpu_profile_estimate(m, CpuProfileRequest{}, at(1e10)); });
  CHECK(refused == bad_input([&] { check_cpu_model(m); }));
  CHECK(refused != "no error");
}

TEST_CASE("core speed: positive rates, measured") {
  const CoreSpeed speed = measured_core_speed();
  CHECK(speed.flops > 1e8);
  CHECK(speed.normals > 1e5);
}

TEST_CASE("the parameters the CPU backend makes for a block are the ones layer_work counts") {
  // The optimizer's timing sizes itself by layer_work's count instead of building the model to count them.
  // Every kind of block the backend builds (the counts follow the shape, not the size, so tiny ones serve):
  // Llama's and GPT's dense blocks, and a dense and an MoE block of each MoE kind (shared expert; biases).
  for (const Model& m : {test::tiny_llama(), test::tiny_gpt(), test::tiny_moe(), test::tiny_moe(3, true)}) {
    const Model one = one_block_per_kind(m);
    CpuModel built(one, 1);
    for (int i = 1; i + 1 < built.num_layers(); ++i) {
      double made = 0;
      for (const Param* p : built.params(LayerRange{i, i})) made += static_cast<double>(p->value.size());
      INFO(m.name << " layer " << i);
      CHECK(made == layer_work(one, one.layers[static_cast<size_t>(i)], Workload{}).parameters);
    }
  }
}

TEST_CASE("profile and run refuse a CPU profile this machine cannot take, naming the way out") {
  const CliResult p = run_cli({"profile", "--model", "llama3-70b"});
  CHECK(p.code == 2);
  CHECK_THAT(p.err, Catch::StartsWith("error: profile: the float32 tensors of the embedding, one block and the head of "
                                      "llama3-70b at micro-batch size 1 and 8192 tokens (2.96e+09 parameters with their "
                                      "gradients) would take about "));
  CHECK_THAT(p.err, Catch::EndsWith("; lower --seq-len or --micro-batch-size, or profile with --backend cuda or pass "
                                    "--allow-large\n"));
  // run profiles first when given neither --profile nor --no-profile.
  const CliResult r = run_cli({"run", "--model", "llama3-70b", "--cluster", "ideal", "--pp", "2", "--microbatches", "2",
                               "--compute", "sleep"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("error: run: profiling first: "));
  CHECK_THAT(r.err, Catch::EndsWith("; give --profile FILE or --no-profile, lower --seq-len or --micro-batch-size, or "
                                    "profile with --backend cuda or pass --allow-large\n"));
}

TEST_CASE("a profile pass runs as many copies of the blocks as push one out of the caches, at most the model's") {
  // The tiny Llama's block with its gradients and activations is a few kB: every one of the model's blocks.
  CHECK(pass_copies(test::tiny_llama(3), 1, 8) == 3);
  CHECK(pass_copies(test::tiny_llama(12), 1, 8) == 12);
  // A block of llama3-8b alone is past the 64 MiB: one copy, as before passes.
  CHECK(pass_copies(model_preset("llama3-8b"), 1, 256) == 1);
  // In between: the fewest copies of 64 MiB or more. A 32-block model whose block takes 8 MiB (weights, gradients
  // and what one micro-batch keeps): 8 copies.
  TransformerConfig c = *test::tiny_llama(32).transformer;
  c.hidden = 256;
  c.heads = 4;
  c.kv_heads = 4;
  c.head_dim = 64;
  c.ffn = 1024;
  const Model mid = make_transformer_model("mid", c);
  const Model one = one_block_per_kind(mid);
  Workload w;
  w.micro_batch_size = 1;
  w.seq_len = 8;
  const KeptBytes k = cpu_kept_bytes(c, LayerKind::Block, 0, 1, 8, Recompute::None);
  const double copy = 8 * layer_work(one, one.layers[1], w).parameters + k.after_forward + k.after_backward + k.output;
  CHECK(pass_copies(mid, 1, 8) == static_cast<int>(std::ceil(64.0 * 1024 * 1024 / copy)));
  CHECK(pass_copies(mid, 1, 8) > 1);
  CHECK(pass_copies(mid, 1, 8) < 32);
}
