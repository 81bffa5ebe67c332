#pragma once
// Which GPU each rank of a single-process run uses and which transport joins them. NCCL refuses two ranks
// of one communicator on one GPU, so ranks that share a GPU go through the local transport (device-to-device
// copies between the ranks' threads).
#include <string>
#include <vector>

namespace pw {

struct GpuPlacement {
  std::vector<int> device_of_rank;  // rank r on GPU r mod devices
  bool local_transport = false;
};

// `transport`: "auto" (NCCL when every rank has a GPU of its own, local otherwise), "nccl" or "local".
// BadInput naming --transport for an unknown name or for nccl with more ranks than GPUs; Runtime error for
// fewer than 1 GPU or rank.
GpuPlacement place_ranks(int ranks, int devices, const std::string& transport);

// "4 ranks on 1 GPU, local transport (device-to-device copies)", "2 ranks on 2 GPUs, NCCL".
std::string placement_text(const GpuPlacement& placement, int devices);

}  // namespace pw
