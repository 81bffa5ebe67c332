// The partitioner on GPT-3 175B (96 blocks + embedding + head = 98 layers) on 1024 A100-80GB, global
// batch 1536, micro-batch 1, tp = 8, dp = 1024 / (8 pp): the sizes the configuration search asks for.
//
//   BM_Problem      make_partition_problem(): layer work, per-GPU-type prefix sums, the schedule's
//                   activation holdings (the schedule itself is built once, outside the loop).
//   BM_Dp           min_bottleneck() alone on a built problem: the exact DP over (stage, prefix).
//   BM_Partition    best_partition() without simulation: problem + DP + up to 64 tied splits.
//   BM_PartitionSim best_partition() as the plan calls it: the tied splits simulated (up to 64).
// Arguments: pp (and v for the interleaved rows).
//   BM_SplitLayers  split_layers() without a split given, on 10^5 layers (the cap a model file may hold):
//                   uniform blocks, and measured-looking costs (each block 1 +- 20%). Argument: stages.
#include <benchmark/benchmark.h>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/model.hpp"
#include "core/stage_costs.hpp"
#include "planner/partition_dp.hpp"
#include "planner/partition_problem.hpp"
#include "planner/partitioner.hpp"
#include "schedules/generators.hpp"
#include "sim/scenario.hpp"

namespace {

using namespace pw;

struct Setup {
  Scenario scenario;
  Schedule schedule;
};

Setup setup(int pp, int vpp) {
  Setup out;
  Scenario s;
  s.model = model_preset("gpt3-175b");
  s.cluster = cluster_preset("dgx-a100-80gb");
  s.parallel.tp = 8;
  s.parallel.pp = pp;
  s.parallel.dp = 1024 / (8 * pp);
  s.parallel.vpp = vpp;
  s.global_batch_size = 1536;
  s.schedule = vpp > 1 ? "interleaved" : "1f1b";
  s.workload.recompute = Recompute::Selective;
  out.scenario = resolve(s);
  ScheduleSpec spec;
  spec.name = out.scenario.schedule;
  spec.ranks = pp;
  spec.microbatches = out.scenario.parallel.microbatches;
  spec.chunks = vpp;
  out.schedule = make_schedule(spec);
  return out;
}

void args(benchmark::internal::Benchmark* b) {
  for (int pp : {16, 32, 64}) b->Args({pp, 1});
  b->Args({16, 2});
  b->Args({8, 4});
  b->Unit(benchmark::kMillisecond);
}

void BM_Problem(benchmark::State& state) {
  const Setup s = setup(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const AnalyticCostModel cost;
  for (auto _ : state) benchmark::DoNotOptimize(make_partition_problem(s.scenario, cost, s.schedule));
}
BENCHMARK(BM_Problem)->Apply(args);

void BM_Dp(benchmark::State& state) {
  const Setup s = setup(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const AnalyticCostModel cost;
  const PartitionProblem p = make_partition_problem(s.scenario, cost, s.schedule);
  const std::vector<double> caps = rank_caps(p);
  for (auto _ : state) benchmark::DoNotOptimize(min_bottleneck(p, caps));
}
BENCHMARK(BM_Dp)->Apply(args);

void BM_Partition(benchmark::State& state) {
  const Setup s = setup(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const AnalyticCostModel cost;
  PartitionOptions o;
  o.simulate = false;
  o.schedule = &s.schedule;
  PartitionResult r;
  for (auto _ : state) benchmark::DoNotOptimize(r = best_partition(s.scenario, cost, o));
  state.counters["ranked"] = r.candidates;
  state.counters["tied"] = r.tied_splits;
  state.counters["bottleneck_ms"] = r.bottleneck_s * 1e3;
}
BENCHMARK(BM_Partition)->Apply(args);

void BM_PartitionSim(benchmark::State& state) {
  const Setup s = setup(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const AnalyticCostModel cost;
  PartitionOptions o;
  o.schedule = &s.schedule;
  PartitionResult r;
  for (auto _ : state) benchmark::DoNotOptimize(r = best_partition(s.scenario, cost, o));
  state.counters["ranked"] = r.candidates;
  state.counters["step_s"] = r.step_time_s;
}
BENCHMARK(BM_PartitionSim)->Apply(args)->Iterations(1);

// Embedding, 99,998 blocks and a head: the most layers a model file may hold (core/file_caps.hpp).
Model hundred_thousand_layers() {
  Model m;
  m.layers.push_back({"embedding", LayerKind::Embedding, std::nullopt});
  for (int i = 0; i < 99'998; ++i) m.layers.push_back({"block", LayerKind::Block, std::nullopt});
  m.layers.push_back({"head", LayerKind::Head, std::nullopt});
  return m;
}

void BM_SplitLayers(benchmark::State& state) {
  const Model m = hundred_thousand_layers();
  const int stages = static_cast<int>(state.range(0));
  const bool measured = state.range(1) != 0;
  std::vector<double> cost;
  if (measured) {
    std::uint64_t x = 12;
    for (size_t i = 0; i < m.layers.size(); ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;  // a fixed LCG: the same costs every run
      cost.push_back(0.8 + 0.4 * static_cast<double>(x >> 11) / 9007199254740992.0);
    }
  }
  for (auto _ : state) benchmark::DoNotOptimize(split_layers(m, stages, {}, cost));
}
BENCHMARK(BM_SplitLayers)->Args({8, 0})->Args({64, 0})->Args({8, 1})->Args({64, 1})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
