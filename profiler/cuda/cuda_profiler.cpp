// profile_cuda: the layers, the optimizer and the links of this machine's GPUs.
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/version.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "profiler/cuda/gpu_timing.hpp"

namespace pw {

CudaProfileResult profile_cuda(const Model& model, const CudaProfileRequest& request) {
  cuda::check_gpu_model(model);
  if (request.link_repetitions < 1)
    throw_bad_input("--link-repetitions: must be at least 1, got {}", request.link_repetitions);
  if (request.tp < 0 || request.dp < 0) throw_bad_input("--tp, --dp: must be 0 (every GPU) or more");
  const GpuProbe probe = probe_gpus();
  if (!gpu_present(probe)) throw_runtime("{}", no_gpu_text(probe));
  const int devices = probe.count;
  CudaProfileRequest r = request;
  if (r.seq_len == 0) r.seq_len = model.default_seq_len();
  int groups_tp = r.tp, groups_dp = r.dp;
  if (r.links) {
    if (groups_tp == 0 && groups_dp == 0) groups_tp = devices, groups_dp = 1;
    if (groups_tp == 0) groups_tp = 1;
    if (groups_dp == 0) groups_dp = 1;
    if (groups_tp * groups_dp > devices)
      throw_bad_input("--tp {} x --dp {}: {} GPUs, but this machine has {}", groups_tp, groups_dp, groups_tp * groups_dp,
                      devices);
  }

  CudaProfileResult out;
  Profile& p = out.profile;
  p.tool = fmt::format("pipewright {} profiler (cuda, {})", kVersion, to_string(r.dtype));
  cudaDeviceProp prop{};
  PW_CUDA(cudaGetDeviceProperties(&prop, 0));
  p.machine.backend = "cuda";
  p.machine.device = fmt::format("{} x {}", devices, prop.name);
  p.machine.cores = prop.multiProcessorCount;
  p.machine.threads_per_rank = 1;
  {
    PW_CUDA(cudaSetDevice(0));
    cuda::GpuContext g(0, r.dtype);
    p.layers = cuda::profile_gpu_layers(g, model, r, out.report);
    p.optimizer_s_per_parameter = cuda::profile_gpu_optimizer(g, model, r);
  }
  if (!r.kernel_gemms.empty()) {
    KernelTablesOut tables;
    tables.system = chip_of_device(prop.name);
    tables.software = p.tool;
    tables.source = "pipewright profile --kernels-out";
    tables.tables.push_back(cuda::profile_gpu_gemm_table(r.kernel_gemms, r.options));
    out.kernel_tables = std::move(tables);
  }
  out.report += "\n";
  const double largest = r.links ? r.link_max_bytes : 64.0 * 1024 * 1024;
  const std::vector<double> sizes = geometric_sizes(1024, largest, 4);
  p.links = cuda::profile_gpu_links(devices, sizes, r.link_repetitions, r.links, out.report);
  if (!r.links) return out;

  std::vector<std::vector<int>> tp = tp_groups(groups_tp, groups_dp, 1), dp = dp_groups(groups_tp, groups_dp, 1);
  if (devices > 1) {
    out.report += cuda::profile_gpu_collectives(tp, "tp", sizes, r.link_repetitions, r.dtype, p.links, p.collectives);
    out.report += cuda::profile_gpu_collectives(dp, "dp", sizes, r.link_repetitions, r.dtype, p.links, p.collectives);
  } else {
    out.report += "  one GPU: no collectives to measure\n";
  }
  GpuSpec gpu;
  out.report += cuda::profile_gemm_overlap(devices, gpu);
  if (devices > 1) out.cluster = measured_cluster(fmt::format("measured-{}x-{}", devices, prop.name), gpu, devices, p.links);
  return out;
}

}  // namespace pw
