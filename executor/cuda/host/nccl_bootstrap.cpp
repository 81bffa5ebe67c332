#include "executor/cuda/host/nccl_bootstrap.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

NcclBootstrap plan_bootstrap(const LaunchEnv& env, int schedule_ranks, int visible_gpus,
                             const std::string& rendezvous_option) {
  if (schedule_ranks < 1) throw_bad_input("--pp: the plan needs at least 1 rank, got {}", schedule_ranks);
  if (visible_gpus < 1) throw_runtime("NCCL bootstrap: no GPU visible to this process");
  NcclBootstrap b;
  b.world_ranks = schedule_ranks;
  if (env.launcher == "none") {
    for (int r = 0; r < schedule_ranks; ++r) b.devices.push_back(r % visible_gpus);
    return b;
  }
  const int processes = env.world_size;
  if (schedule_ranks % processes != 0)
    throw_bad_input("--pp: the plan has {} ranks for {} processes; start as many processes as ranks, or a divisor of "
                    "them (one per node with a thread per GPU)",
                    schedule_ranks, processes);
  const int per_process = schedule_ranks / processes;
  b.first_rank = env.rank * per_process;
  const int node_needs = env.local_world_size * per_process;
  int first_gpu = 0;
  if (visible_gpus >= node_needs) {
    first_gpu = env.local_rank * per_process;
  } else if (visible_gpus != per_process) {
    throw_bad_input("GPUs: {} process{} on this node with {} rank{} each need {} GPUs, {} visible; NCCL needs a GPU per "
                    "rank",
                    env.local_world_size, env.local_world_size == 1 ? "" : "es", per_process, per_process == 1 ? "" : "s",
                    node_needs, visible_gpus);
  } else if (!env.gpus_chosen) {
    // Each process sees just its share but nobody chose which: every one of them would take GPUs 0 onwards.
    throw_bad_input("GPUs: {} processes on this node with {} rank{} each need {} GPUs, {} visible and CUDA_VISIBLE_DEVICES "
                    "unset; give each process its own GPUs (CUDA_VISIBLE_DEVICES, srun --gpus-per-task) or start fewer "
                    "processes per node",
                    env.local_world_size, per_process, per_process == 1 ? "" : "s", node_needs, visible_gpus);
  }
  for (int i = 0; i < per_process; ++i) b.devices.push_back(first_gpu + i);

  // The id rides the job's own process group (MPI under mpirun, TCP under torchrun and srun), which
  // already holds the port a rendezvous of its own would take; --rendezvous overrides it.
  if (!rendezvous_option.empty()) {
    b.id_source = NcclBootstrap::IdSource::Rendezvous;
    b.rendezvous = rendezvous_from_text(rendezvous_option);
    b.party = rendezvous_party(env, b.rendezvous);
  } else {
    b.id_source = NcclBootstrap::IdSource::Group;
  }
  return b;
}

std::string to_text(const NcclBootstrap& b) {
  const int last = b.first_rank + static_cast<int>(b.devices.size()) - 1;
  std::string gpus;
  for (int d : b.devices) gpus += fmt::format("{}{}", gpus.empty() ? "" : ",", d);
  const std::string ranks = b.first_rank == last ? fmt::format("rank {}", last) : fmt::format("ranks {}-{}", b.first_rank, last);
  std::string id;
  switch (b.id_source) {
    case NcclBootstrap::IdSource::InProcess: id = "made in this process"; break;
    case NcclBootstrap::IdSource::Group: id = "over the process group"; break;
    case NcclBootstrap::IdSource::Rendezvous: id = "over " + to_text(b.rendezvous); break;
  }
  return fmt::format("{} of {} on GPU{} {}; NCCL id {}", ranks, b.world_ranks, b.devices.size() == 1 ? "" : "s", gpus, id);
}

}  // namespace pw
