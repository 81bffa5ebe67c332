// `profile --backend cuda --kernels-out`: the model's GEMM shapes timed on GPU 0 in bf16.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/version.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/device_memory.hpp"
#include "executor/cuda/gemm.hpp"
#include "executor/cuda/kernels.cuh"
#include "profiler/cuda/gpu_timing.hpp"

namespace pw::cuda {

KernelTableOut profile_gpu_gemm_table(const std::vector<GemmShape>& shapes, const ProfileOptions& options) {
  DeviceGuard on(0);
  cudaDeviceProp prop{};
  PW_CUDA(cudaGetDeviceProperties(&prop, 0));
  DeviceAllocator allocator(0);
  cudaStream_t stream = nullptr;
  PW_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  KernelTableOut t;
  t.kind = "gemm_perf";
  t.keys = {"gemm_dtype", "m", "n", "k"};
  t.measured_on = {{"device", prop.name}, {"tool", fmt::format("pipewright {} profiler (cuda, cuBLASLt)", kVersion)}};
  {
    Gemm gemm(stream, allocator);
    cudaEvent_t start = nullptr, end = nullptr;
    PW_CUDA(cudaEventCreate(&start));
    PW_CUDA(cudaEventCreate(&end));
    const double budget_s = options.min_time_s / std::max<double>(1, static_cast<double>(shapes.size()));
    std::uint64_t seed = 1;
    for (const GemmShape& g : shapes) {
      const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
      const BlockPtr a = allocate_block(allocator, static_cast<std::size_t>(m) * k * 2);
      const BlockPtr b = allocate_block(allocator, static_cast<std::size_t>(k) * n * 2);
      const BlockPtr c = allocate_block(allocator, static_cast<std::size_t>(m) * n * 2);
      // Random operands: tensor cores on zeros hold higher clocks than a model's GEMMs see.
      fill_normal(DType::BF16, a->data(), static_cast<long>(m) * k, seed++, 1.0f, stream);
      fill_normal(DType::BF16, b->data(), static_cast<long>(k) * n, seed++, 1.0f, stream);
      const auto timed = [&](int runs) {
        PW_CUDA(cudaEventRecord(start, stream));
        for (int i = 0; i < runs; ++i)
          gemm.run(DType::BF16, DType::BF16, m, n, k, {a->data(), k, false, 0}, {b->data(), n, false, 0}, c->data(), n,
                   0, 1.0f, 0.0f);
        PW_CUDA(cudaEventRecord(end, stream));
        PW_CUDA(cudaEventSynchronize(end));
        float ms = 0;
        PW_CUDA(cudaEventElapsedTime(&ms, start, end));
        return ms * 1e-3 / runs;
      };
      for (int i = 0; i < std::max(1, options.warmup); ++i) timed(1);
      const double once = std::max(timed(1), 1e-7);
      const int runs = std::clamp(static_cast<int>(std::ceil(budget_s / once)), std::max(1, options.min_repetitions),
                                  std::max(1, options.max_repetitions));
      t.rows.push_back({"bfloat16", g.m, g.n, g.k, timed(runs)});
    }
    cudaEventDestroy(start);
    cudaEventDestroy(end);
  }
  cudaStreamDestroy(stream);
  return t;
}

}  // namespace pw::cuda
