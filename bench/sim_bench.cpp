// The simulator alone on a large schedule (p = 64, m = 1024, interleaved v = 4: about 1.6 M lowered
// actions), against a bare longest-path pass over the same dependency graph with Boost.Graph.
//
//   BM_Simulate          simulate() on the lowered schedule (lowering not timed), no observer.
//   BM_LongestPathBuild  building the Boost.Graph DAG (adjacency_list), timed apart from the pass.
//   BM_LongestPath       topological sort + relaxation on that adjacency_list (built beforehand).
//   BM_LongestPathCsr    the same pass on a compressed_sparse_row_graph (contiguous edges).
//
// The workload and the DAG are in bench/sim_workload.hpp; the makespan and the simulated pipeline time are
// both reported as counters. bench/sim_guard.cpp checks the ratio of the first and the last in CI.
#include <benchmark/benchmark.h>

#include "bench/sim_workload.hpp"

namespace {

using namespace pw;
using namespace pw::bench;

constexpr int kRanks = 64, kMicrobatches = 1024, kChunks = 4;

const SimWorkload& setup() {
  static const SimWorkload s = make_workload(kRanks, kMicrobatches, kChunks);
  return s;
}

void BM_Simulate(benchmark::State& state) {
  const SimWorkload& s = setup();
  SimResult r;
  for (auto _ : state) {
    r = simulate(s.input);
    benchmark::DoNotOptimize(r.step_time_s);
  }
  state.counters["actions"] = static_cast<double>(r.actions);
  state.counters["actions_per_s"] =
      benchmark::Counter(static_cast<double>(r.actions), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pipeline_time_s"] = r.pipeline_time_s;
  state.counters["step_time_s"] = r.step_time_s;
}
BENCHMARK(BM_Simulate)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_LongestPathBuild(benchmark::State& state) {
  const SimWorkload& s = setup();
  for (auto _ : state) {
    AdjacencyGraph g = adjacency_graph(dependency_edges(s.input));
    benchmark::DoNotOptimize(&g);
  }
  state.counters["nodes"] = static_cast<double>(s.actions);
}
BENCHMARK(BM_LongestPathBuild)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_LongestPath(benchmark::State& state) {
  const SimWorkload& s = setup();
  const EdgeList el = dependency_edges(s.input);
  const AdjacencyGraph g = adjacency_graph(el);
  double makespan = 0;
  for (auto _ : state) {
    makespan = longest_path(g, boost::get(boost::edge_weight, g), el.tail);
    benchmark::DoNotOptimize(makespan);
  }
  state.counters["nodes"] = static_cast<double>(boost::num_vertices(g));
  state.counters["edges"] = static_cast<double>(boost::num_edges(g));
  state.counters["actions_per_s"] =
      benchmark::Counter(static_cast<double>(s.actions), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["makespan_s"] = makespan;
}
BENCHMARK(BM_LongestPath)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_LongestPathCsr(benchmark::State& state) {
  const SimWorkload& s = setup();
  const EdgeList el = dependency_edges(s.input);
  const CsrGraph g = csr_graph(el);
  double makespan = 0;
  for (auto _ : state) {
    makespan = longest_path(g, boost::get(&Weight::w, g), el.tail);
    benchmark::DoNotOptimize(makespan);
  }
  state.counters["nodes"] = static_cast<double>(boost::num_vertices(g));
  state.counters["edges"] = static_cast<double>(boost::num_edges(g));
  state.counters["actions_per_s"] =
      benchmark::Counter(static_cast<double>(s.actions), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["makespan_s"] = makespan;
}
BENCHMARK(BM_LongestPathCsr)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
