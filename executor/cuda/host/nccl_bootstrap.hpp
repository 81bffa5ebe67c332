#pragma once
// How a process of a launched job finds its NCCL ranks, their GPUs and the unique id: one process per GPU,
// or one per node with a thread per GPU, started by mpirun, srun or torchrun (executor/launch_env.hpp).
#include <string>
#include <vector>

#include "executor/cuda/host/rendezvous.hpp"
#include "executor/launch_env.hpp"

namespace pw {

struct NcclBootstrap {
  enum class IdSource { InProcess, Group, Rendezvous };  // Group: the launched job's process group broadcasts it
  int world_ranks = 1;       // the job's ranks (the schedule's)
  int first_rank = 0;        // this process's first global rank
  std::vector<int> devices;  // the GPU of each of this process's ranks (threads), in rank order
  IdSource id_source = IdSource::InProcess;
  RendezvousSpec rendezvous;  // IdSource::Rendezvous: where the processes meet
  RendezvousParty party;      // IdSource::Rendezvous: who meets there, and the job token
};

// `schedule_ranks`: the plan's ranks; `visible_gpus`: the GPUs this process sees; `rendezvous_option`: the
// --rendezvous text, or "" for the launcher's way. Without a launcher every rank is a thread here (rank r on
// GPU r mod the GPUs). Under one, the job's P processes hold schedule_ranks / P ranks each (BadInput naming
// --pp when P does not divide them); a process's GPUs are its node's share (local rank x ranks per process
// onwards) or, when CUDA_VISIBLE_DEVICES left it exactly its own, those (BadInput when neither fits: NCCL
// needs a GPU per rank; and when the process sees exactly its own share but CUDA_VISIBLE_DEVICES did not choose
// it, since every process would then take the same GPUs). The id: over --rendezvous when given, else over
// the job's process group (MPI under mpirun, TCP under torchrun and srun; IdSource::Group).
NcclBootstrap plan_bootstrap(const LaunchEnv& env, int schedule_ranks, int visible_gpus,
                             const std::string& rendezvous_option);

// "ranks 4-7 of 16 on GPUs 0,1,2,3; NCCL id over tcp:node-001:29501"
std::string to_text(const NcclBootstrap& bootstrap);

}  // namespace pw
