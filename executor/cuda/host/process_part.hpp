#pragma once
// This process's part of a CUDA run: which of the schedule's ranks it holds (one thread each), their GPUs,
// the transport between them, and how the NCCL unique id reaches it. One process holding every rank (no
// launcher) is the special case of the same plan. Plain C++, so that it is tested without a GPU.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "executor/cuda/host/nccl_bootstrap.hpp"
#include "executor/cuda/host/rendezvous.hpp"
#include "executor/launch_env.hpp"

namespace pw {

struct CudaProcessPart {
  NcclBootstrap bootstrap;       // the schedule's ranks, this process's first one, its GPUs, the id's way
  int process = 0;               // this process among the launched ones
  int processes = 1;
  bool local_transport = false;  // device-to-device copies between this process's ranks (one process only)

  // The ranks held here, ascending: first_rank onwards, one per GPU entry.
  std::vector<int> ranks() const;
  bool holds(int rank) const;
  // The GPU of a rank held here; Runtime error for another.
  int device_of(int rank) const;
};

// `env`: the launcher's variables (launcher "none": every rank is a thread here, rank r on GPU r mod the
// visible GPUs); `schedule_ranks`: the plan's ranks; `visible_gpus`: cudaGetDeviceCount here; `transport`:
// --transport (auto, nccl or local); `rendezvous`: --rendezvous or "". One process: NCCL when every rank has
// a GPU of its own, the local transport otherwise (place_ranks). Several processes: NCCL, their ranks and
// GPUs as plan_bootstrap says; BadInput naming --transport for local (it joins the ranks of one process
// only), and naming --rendezvous when it is given without a launcher.
CudaProcessPart plan_cuda_process(const LaunchEnv& env, int schedule_ranks, int visible_gpus,
                                  const std::string& transport, const std::string& rendezvous);

// The NCCL unique id of the run, in every process: made here when one process holds every rank; otherwise
// made at process 0 only (`make_id` is called there and nowhere else) and sent to the others by `broadcast`
// (the id over MPI) or over the rendezvous, where the process index is the rendezvous rank and the process
// count its world. Runtime error past `deadline`, for a broadcast missing where MPI carries the id, or for
// bytes of another size than an id's.
UniqueIdBytes distribute_nccl_id(const CudaProcessPart& part, const std::function<UniqueIdBytes()>& make_id,
                                 const BroadcastBytes& broadcast, RendezvousClock::time_point deadline);

}  // namespace pw
