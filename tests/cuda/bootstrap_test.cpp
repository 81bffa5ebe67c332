// Ranks, GPUs and the NCCL id's way for processes started by mpirun, srun or torchrun.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "executor/cuda/host/nccl_bootstrap.hpp"
#include "launched.hpp"

using namespace pw;

using test::launched;

TEST_CASE("without a launcher every rank is a thread here, round the GPUs", "[cuda][host]") {
  const NcclBootstrap b = plan_bootstrap(LaunchEnv{}, 4, 2, "");
  CHECK(b.world_ranks == 4);
  CHECK(b.first_rank == 0);
  CHECK(b.devices == std::vector<int>{0, 1, 0, 1});
  CHECK(b.id_source == NcclBootstrap::IdSource::InProcess);
  CHECK(to_text(b) == "ranks 0-3 of 4 on GPUs 0,1,0,1; NCCL id made in this process");
}

TEST_CASE("one process per GPU: torchrun on 2 nodes of 4", "[cuda][host]") {
  // Global rank 6 is local rank 2 of node 1; every process sees the node's 4 GPUs. The id rides the job's
  // process group (TCP under torchrun), unless --rendezvous names another way.
  const NcclBootstrap b = plan_bootstrap(launched("torchrun", 6, 8, 2, 4, "node-001", 29500), 8, 4, "");
  CHECK(b.first_rank == 6);
  CHECK(b.devices == std::vector<int>{2});
  CHECK(b.id_source == NcclBootstrap::IdSource::Group);
  CHECK(to_text(b) == "rank 6 of 8 on GPU 2; NCCL id over the process group");
  const NcclBootstrap given = plan_bootstrap(launched("torchrun", 6, 8, 2, 4, "node-001", 29500), 8, 4, "tcp:node-001:29600");
  CHECK(given.id_source == NcclBootstrap::IdSource::Rendezvous);
  CHECK(to_text(given) == "rank 6 of 8 on GPU 2; NCCL id over tcp:node-001:29600");
}

TEST_CASE("one process per node with a thread per GPU, CUDA_VISIBLE_DEVICES narrowing a process to its GPU", "[cuda][host]") {
  // mpirun -np 2 (one per node), 8 ranks: 4 threads per process on GPUs 0-3; the id over MPI.
  const NcclBootstrap node = plan_bootstrap(launched("openmpi", 1, 2, 0, 1), 8, 4, "");
  CHECK(node.first_rank == 4);
  CHECK(node.devices == std::vector<int>{0, 1, 2, 3});
  CHECK(node.id_source == NcclBootstrap::IdSource::Group);
  CHECK(to_text(node) == "ranks 4-7 of 8 on GPUs 0,1,2,3; NCCL id over the process group");
  // Slurm's --gpus-per-task leaves each task only its GPU, as device 0 (and says so in CUDA_VISIBLE_DEVICES).
  LaunchEnv chosen = launched("slurm", 3, 4, 3, 4, "n1", 1234);
  chosen.gpus_chosen = true;
  const NcclBootstrap narrowed = plan_bootstrap(chosen, 4, 1, "file:/shared/id");
  CHECK(narrowed.devices == std::vector<int>{0});
  CHECK(narrowed.rendezvous.kind == RendezvousSpec::Kind::File);
  CHECK(narrowed.rendezvous.path == "/shared/id");
}

TEST_CASE("bootstrap errors name what to change", "[cuda][host]") {
  // One GPU visible to each of 4 processes on a node, chosen by nobody: all four would take GPU 0.
  CHECK(bad_input([] { plan_bootstrap(launched("slurm", 3, 4, 3, 4, "n1", 1234), 4, 1, "file:/shared/id"); }) ==
        "GPUs: 4 processes on this node with 1 rank each need 4 GPUs, 1 visible and CUDA_VISIBLE_DEVICES unset; give each "
        "process its own GPUs (CUDA_VISIBLE_DEVICES, srun --gpus-per-task) or start fewer processes per node");
  CHECK(bad_input([] { plan_bootstrap(launched("openmpi", 0, 3, 0, 3), 4, 8, ""); }) ==
        "--pp: the plan has 4 ranks for 3 processes; start as many processes as ranks, or a divisor of them (one per "
        "node with a thread per GPU)");
  CHECK(bad_input([] { plan_bootstrap(launched("torchrun", 0, 8, 0, 8, "a", 1), 8, 4, ""); }) ==
        "GPUs: 8 processes on this node with 1 rank each need 8 GPUs, 4 visible; NCCL needs a GPU per rank");
  CHECK(bad_input([] { plan_bootstrap(launched("slurm", 0, 2, 0, 2), 2, 2, "udp:n1:1"); }) ==
        "--rendezvous: 'udp:n1:1' is neither file:PATH (a path every node shares) nor tcp:HOST:PORT");
}
