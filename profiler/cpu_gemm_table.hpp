#pragma once
// `profile --kernels-out` on the CPU: each GEMM shape the model runs (profiler/model_gemms.hpp) timed on the CPU
// backend's float32 product, as a gemm_perf table of pipewright's kernel-table format.
#include <vector>

#include "core/layer_work.hpp"
#include "kernels/kernel_table_writer.hpp"
#include "core/work_estimate.hpp"
#include "profiler/core_speed.hpp"
#include "profiler/repeat.hpp"

namespace pw {

// gemm_perf rows (gemm_dtype float32, m, n, k, the median seconds): an m x k by k x n product of random
// matrices, repeated as `options` says (all shapes interleaved, so a machine that changes speed moves them alike).
KernelTableOut time_cpu_gemms(const std::vector<GemmShape>& shapes, const ProfileOptions& options);

// What the sweep takes at `core`'s FLOP/s: every shape's FLOPs times the runs the repetition rules make at
// least (warm-up, one untimed run a round, the minimum timed), and its operands' float32 bytes, all made first.
WorkEstimate cpu_gemm_sweep_estimate(const std::vector<GemmShape>& shapes, const ProfileOptions& options,
                                     const CoreSpeed& core);

}  // namespace pw
