#pragma once
// What `pipewright profile --backend cuda` calls. Declared in every build; without CUDA it throws BadInput
// with cuda_not_built_text().
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "kernels/kernel_table_writer.hpp"
#include "executor/cuda/host/cuda_api.hpp"
#include "profiler/cpu_profiler.hpp"
#include "profiler/profile.hpp"

namespace pw {

struct CudaProfileRequest {
  std::vector<int> micro_batch_sizes{1};
  int seq_len = 0;  // 0: the model's
  DType dtype = DType::BF16;
  ProfileOptions options;
  // Every GPU pair's NCCL send/receive, the collectives over the tp and dp groups and the GEMM slowdown beside
  // NCCL traffic; without it only the first link (GPU 0 and 1, or a device-to-device copy on one GPU).
  bool links = false;
  int link_repetitions = 5;
  double link_max_bytes = 1024.0 * 1024 * 1024;
  int tp = 0;  // collective groups: tp x dp GPUs (0: one group of every GPU)
  int dp = 0;
  // --kernels-out: these GEMM shapes timed in bf16 on GPU 0 (cuBLASLt, random operands) as a gemm_perf table.
  std::vector<GemmShape> kernel_gemms;
};

struct CudaProfileResult {
  Profile profile;
  std::string report;              // links, collectives and the overlap, as text after the profile's table
  std::optional<Cluster> cluster;  // with links: this node as a cluster file with its measured matrix
  std::optional<KernelTablesOut> kernel_tables;  // with kernel_gemms
};

// "NVIDIA H200" -> "h200", "NVIDIA A100-SXM4-80GB" -> "a100": the chip, as kernel tables name their system
// (gpu_matches_system reads it against a cluster's GPU name).
std::string chip_of_device(const std::string& device_name);

// Layers on GPU 0 timed with CUDA events (warm-up, then the median of the repetitions), the optimizer, the
// links. Runtime error with no_gpu_text() without a GPU.
CudaProfileResult profile_cuda(const Model& model, const CudaProfileRequest& request);

// One node of `gpus` GPUs as a cluster: its measured matrix from `links` (link_matrix), the intra-node link
// the median of the measured ones (bandwidth and latency apart), the inter-node link the same (one node
// says nothing about the network; edit it before planning across nodes).
Cluster measured_cluster(const std::string& name, const GpuSpec& gpu, int gpus, const std::vector<LinkProfile>& links);

}  // namespace pw
