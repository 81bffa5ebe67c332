#pragma once
// The pieces of the CUDA profiler: layers and the optimizer timed with CUDA events on GPU 0; NCCL links,
// collectives and the GEMM slowdown beside NCCL traffic across the GPUs of this process.
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/layer_work.hpp"
#include "kernels/kernel_table_writer.hpp"
#include "executor/cuda/cuda_layers.hpp"
#include "profiler/cuda/host/collectives.hpp"
#include "profiler/cuda/host/cuda_profiler_api.hpp"

namespace pw::cuda {

// F, B (keeping the weight-gradient work) and W of the embedding, one block and the head of `model`, each
// timed apart with CUDA events; the bytes F keeps and B keeps for W (rounded device blocks), and F's
// high-water mark above what was in use before it, appended to `report`.
std::vector<LayerProfile> profile_gpu_layers(GpuContext& g, const Model& model, const CudaProfileRequest& request,
                                             std::string& report);
// Seconds per parameter of one Adam step over one block's parameters.
double profile_gpu_optimizer(GpuContext& g, const Model& model, const CudaProfileRequest& request);

// One-way times: ping-pong between two GPUs over NCCL (halved round trips), or on one GPU a device-to-device
// copy (the local transport's link). Fitted as latency + bytes / bandwidth.
std::vector<LinkProfile> profile_gpu_links(int devices, const std::vector<double>& sizes, int repetitions, bool all_pairs,
                                           std::string& report);
// All-reduce, all-gather and reduce-scatter over each group (GPU ids), nccl-tests' way: warm-up, then the
// mean of back-to-back iterations. Appends each measurement to `measured` (with the group's slowest link
// among `links`) and returns the tables.
std::string profile_gpu_collectives(const std::vector<std::vector<int>>& groups, const std::string& kind,
                                    const std::vector<double>& sizes, int repetitions, DType dtype,
                                    const std::vector<LinkProfile>& links, std::vector<CollectiveProfile>& measured);
// A large GEMM on GPU 0 alone and with all-reduces running on every GPU beside it; also what GPU 0 reaches
// alone (FLOP/s, into `gpu`) and its memory bandwidth (a large device-to-device copy).
std::string profile_gemm_overlap(int devices, GpuSpec& gpu);

// Each shape's bf16 GEMM (row-major m x k by k x n, cuBLASLt, random operands) on GPU 0: one run to size the
// loop, then back-to-back runs for at least options.min_time_s / shapes (and options.min_repetitions), their
// mean; as a gemm_perf table of kernel tables.
KernelTableOut profile_gpu_gemm_table(const std::vector<GemmShape>& shapes, const ProfileOptions& options);

}  // namespace pw::cuda
