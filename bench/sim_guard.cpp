// The simulator against its floor in one process: simulate() and the longest-path pass over the same
// dependency graph (bench/sim_workload.hpp), the workload of bench/sim_bench.cpp by default.
//
//   sim_guard [--ranks P] [--microbatches M] [--chunks V] [--repeat N]
//
// Natively it times both N times, alternating (so that a busy machine slows both alike), and prints each
// one's median CPU time and their ratio. Under callgrind (bench/sim_guard.sh runs it so, with
// --instr-atstart=no) it runs each once with instrumentation on around it alone and dumps its counts as
// "simulate" and "floor", which the script compares: instruction counts do not move with the machine's load.
#include <valgrind/callgrind.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench/sim_workload.hpp"

namespace {

using namespace pw;
using namespace pw::bench;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int positive_option(const char* name, const char* value) {
  char* end = nullptr;
  const long v = value ? std::strtol(value, &end, 10) : 0;
  if (!value || *end != '\0' || v < 1 || v > 1 << 20) {
    std::fprintf(stderr, "error: %s needs a whole number from 1 to 1048576, got '%s'\n", name, value ? value : "");
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 64, microbatches = 1024, chunks = 4, repeat = 5;
  for (int i = 1; i < argc; ++i) {
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!std::strcmp(argv[i], "--ranks")) ranks = positive_option("--ranks", value);
    else if (!std::strcmp(argv[i], "--microbatches")) microbatches = positive_option("--microbatches", value);
    else if (!std::strcmp(argv[i], "--chunks")) chunks = positive_option("--chunks", value);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = positive_option("--repeat", value);
    else {
      std::fprintf(stderr, "error: unknown option '%s'; use --ranks, --microbatches, --chunks or --repeat\n", argv[i]);
      return 2;
    }
    ++i;
  }
  const SimWorkload w = make_workload(ranks, microbatches, chunks);
  const EdgeList edges = dependency_edges(w.input);
  const CsrGraph graph = csr_graph(edges);
  std::printf("workload: interleaved 1F1B, p %d, m %d, v %d: %ld actions, %zu edges\n", ranks, microbatches, chunks,
              w.actions, edges.edges.size());

  double pipeline_s = 0, makespan_s = 0;
  if (RUNNING_ON_VALGRIND) {
    CALLGRIND_START_INSTRUMENTATION;
    pipeline_s = simulate(w.input).pipeline_time_s;
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT("simulate");
    CALLGRIND_START_INSTRUMENTATION;
    makespan_s = longest_path(graph, boost::get(&Weight::w, graph), edges.tail);
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT("floor");
    std::printf("pipeline time %.6f s, longest path %.6f s\n", pipeline_s, makespan_s);
    return 0;
  }
  std::vector<double> sim_s, floor_s;
  for (int k = 0; k < repeat; ++k) {
    double t = thread_cpu_s();
    pipeline_s = simulate(w.input).pipeline_time_s;
    sim_s.push_back(thread_cpu_s() - t);
    t = thread_cpu_s();
    makespan_s = longest_path(graph, boost::get(&Weight::w, graph), edges.tail);
    floor_s.push_back(thread_cpu_s() - t);
  }
  std::printf("pipeline time %.6f s, longest path %.6f s\n", pipeline_s, makespan_s);
  std::printf("simulate: %.1f ms CPU, floor: %.1f ms CPU (medians of %d), ratio %.2fx\n", 1e3 * median(sim_s),
              1e3 * median(floor_s), repeat, median(sim_s) / median(floor_s));
  return 0;
}
