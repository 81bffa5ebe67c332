#include "executor/cuda/host/gpu_placement.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

GpuPlacement place_ranks(int ranks, int devices, const std::string& transport) {
  if (transport != "auto" && transport != "nccl" && transport != "local")
    throw_bad_input("--transport: must be auto, nccl or local, got '{}'", transport);
  if (devices < 1) throw_runtime("GPU placement: no GPU to place ranks on");
  if (ranks < 1) throw_runtime("GPU placement: no rank to place");
  if (transport == "nccl" && ranks > devices)
    throw_bad_input("--transport: nccl needs a GPU per rank (NCCL refuses two ranks on one GPU); {} ranks, {} GPU{}; "
                    "use --transport local or auto",
                    ranks, devices, devices == 1 ? "" : "s");
  GpuPlacement p;
  for (int r = 0; r < ranks; ++r) p.device_of_rank.push_back(r % devices);
  p.local_transport = transport == "local" || (transport == "auto" && ranks > devices);
  return p;
}

std::string placement_text(const GpuPlacement& p, int devices) {
  const int ranks = static_cast<int>(p.device_of_rank.size());
  const int used = ranks < devices ? ranks : devices;
  return fmt::format("{} rank{} on {} GPU{}, {}", ranks, ranks == 1 ? "" : "s", used, used == 1 ? "" : "s",
                     p.local_transport ? "local transport (device-to-device copies)" : "NCCL");
}

}  // namespace pw
