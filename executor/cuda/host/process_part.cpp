#include "executor/cuda/host/process_part.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "executor/cuda/host/gpu_placement.hpp"

namespace pw {

std::vector<int> CudaProcessPart::ranks() const {
  std::vector<int> out;
  for (size_t i = 0; i < bootstrap.devices.size(); ++i) out.push_back(bootstrap.first_rank + static_cast<int>(i));
  return out;
}

bool CudaProcessPart::holds(int rank) const {
  return rank >= bootstrap.first_rank && rank < bootstrap.first_rank + static_cast<int>(bootstrap.devices.size());
}

int CudaProcessPart::device_of(int rank) const {
  if (!holds(rank))
    throw_runtime("cuda backend: rank {} runs in another process; this one holds {}", rank, to_text(bootstrap));
  return bootstrap.devices[static_cast<size_t>(rank - bootstrap.first_rank)];
}

CudaProcessPart plan_cuda_process(const LaunchEnv& env, int schedule_ranks, int visible_gpus,
                                  const std::string& transport, const std::string& rendezvous) {
  if (env.launcher == "none" && !rendezvous.empty())
    throw_bad_input("--rendezvous: it hands the NCCL id between processes a launcher started (mpirun, srun); "
                    "without a launcher every rank is a thread of this process, so leave it out");
  CudaProcessPart part;
  part.bootstrap = plan_bootstrap(env, schedule_ranks, visible_gpus, rendezvous);
  part.process = env.launcher == "none" ? 0 : env.rank;
  part.processes = env.launcher == "none" ? 1 : env.world_size;
  if (part.processes == 1) {
    // Every rank here: place_ranks decides the transport (and refuses nccl with ranks sharing a GPU).
    const int distinct = [&] {
      std::vector<int> d = part.bootstrap.devices;
      std::sort(d.begin(), d.end());
      return static_cast<int>(std::unique(d.begin(), d.end()) - d.begin());
    }();
    const GpuPlacement placement = place_ranks(schedule_ranks, distinct, transport);
    part.local_transport = placement.local_transport;
    return part;
  }
  if (transport != "auto" && transport != "nccl" && transport != "local")
    throw_bad_input("--transport: must be auto, nccl or local, got '{}'", transport);
  if (transport == "local")
    throw_bad_input("--transport: local copies between the ranks of one process, and {} started {} processes; use "
                    "--transport nccl or auto",
                    env.launcher, env.world_size);
  return part;
}

UniqueIdBytes distribute_nccl_id(const CudaProcessPart& part, const std::function<UniqueIdBytes()>& make_id,
                                 const BroadcastBytes& broadcast, RendezvousClock::time_point deadline) {
  const NcclBootstrap& b = part.bootstrap;
  if (part.processes == 1 || b.id_source == NcclBootstrap::IdSource::InProcess) return make_id();
  if (b.id_source == NcclBootstrap::IdSource::Rendezvous)
    return exchange_id(b.rendezvous, b.party, make_id, deadline);
  if (!broadcast) throw_runtime("NCCL bootstrap: the id travels over the process group, and this process has none");
  return broadcast_id(part.process, make_id, broadcast, "NCCL bootstrap");
}

}  // namespace pw
