#include "profiler/cpu_gemm_table.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/version.hpp"
#include "executor/cpu_tensor.hpp"
#include "profiler/cpu_profiler.hpp"

namespace pw {

KernelTableOut time_cpu_gemms(const std::vector<GemmShape>& shapes, const ProfileOptions& options) {
  struct Operands {
    Mat a, b, c;
  };
  std::vector<Operands> operands;
  std::vector<TimedRun> runs;
  operands.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& g = shapes[i];
    const auto m = static_cast<Eigen::Index>(g.m), k = static_cast<Eigen::Index>(g.k), n = static_cast<Eigen::Index>(g.n);
    operands.push_back({random_matrix(m, k, 2 * i + 1), random_matrix(k, n, 2 * i + 2), Mat(m, n)});
  }
  for (Operands& o : operands)
    runs.push_back([&o] {
      const auto start = std::chrono::steady_clock::now();
      o.c.noalias() = o.a * o.b;
      return std::vector<double>{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
    });
  const auto samples = repeat_interleaved(options, 1, runs);
  KernelTableOut t;
  t.kind = "gemm_perf";
  t.keys = {"gemm_dtype", "m", "n", "k"};
  t.measured_on = {{"device", cpu_machine_info().device}, {"tool", fmt::format("pipewright {} profiler (cpu)", kVersion)}};
  for (size_t i = 0; i < shapes.size(); ++i)
    t.rows.push_back({"float32", shapes[i].m, shapes[i].n, shapes[i].k, median_of(samples[i][0])});
  return t;
}

WorkEstimate cpu_gemm_sweep_estimate(const std::vector<GemmShape>& shapes, const ProfileOptions& options,
                                     const CoreSpeed& core) {
  double flops = 0, bytes = 0;
  for (const GemmShape& g : shapes) {
    flops += g.flops();
    bytes += 4 * (g.m * g.k + g.k * g.n + g.m * g.n);
  }
  const double runs = options.warmup + std::max(1, options.rounds) + options.min_repetitions;
  WorkEstimate w;
  w.work = fmt::format("{} GEMM shapes of --kernels-out, {:.0f} or more runs each", shapes.size(), runs);
  w.bytes = bytes;
  w.seconds = core.flops > 0 ? flops * runs / core.flops : 0;
  w.fix = "lower --seq-len or --micro-batch-size, or leave out --kernels-out";
  return w;
}

}  // namespace pw
