#pragma once
// Which launcher started this process, and where it sits among the processes it started: read from the
// variables OpenMPI's mpirun, Slurm's srun and PyTorch's torchrun set (docs in shared/design/ecosystem.md).
//
// Precedence when several launchers' variables are present, the innermost launcher first:
//   1. OpenMPI (OMPI_COMM_WORLD_SIZE set): mpirun run inside a Slurm allocation inherits the allocation's
//      SLURM_* variables, which then describe the batch step, not this process; and OpenMPI started under
//      srun --mpi describes the same world Slurm does. The MPI world is the one the processes talk over.
//   2. torchrun (WORLD_SIZE set): `srun torchrun ...` gives one Slurm task per node, so SLURM_PROCID is the
//      node's index while RANK is this worker's.
//   3. Slurm (SLURM_PROCID and SLURM_STEP_ID set): a task srun started. An sbatch batch script also carries
//      SLURM_PROCID=0 and SLURM_NTASKS=N but no step id; a plain command in it is a single process, not
//      rank 0 of N, so without SLURM_STEP_ID (or SLURM_STEPID) Slurm's variables are ignored.
//   Otherwise the launcher is "none": rank 0 of a world of 1.
// MASTER_ADDR and MASTER_PORT are read under every launcher (people export them in Slurm scripts too), and
// ignored without one.
#include <cstddef>
#include <map>
#include <string>

namespace pw {

// The most processes (and nodes, and tasks on a node) read from a launcher's variables: more is refused
// before anything is sized by it.
constexpr int kMostProcesses = 1 << 20;
// PIPEWRIGHT_JOB_TOKEN's length: long enough not to be guessed, short enough for a variable.
constexpr size_t kShortestJobToken = 16;
constexpr size_t kLongestJobToken = 4096;

struct LaunchEnv {
  std::string launcher = "none";  // "none", "openmpi", "slurm", "torchrun"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;
  int master_port = 0;
  // CUDA_VISIBLE_DEVICES is set: the GPUs this process sees were chosen for it (srun --gpus-per-task, a
  // wrapper script), so seeing only its own share does not mean sharing them with the node's others.
  bool gpus_chosen = false;
  // What tells this job's processes from another job's at the same address (executor/job_token.hpp): the
  // variable it came from and its value. PIPEWRIGHT_JOB_TOKEN when set (a secret, if the user keeps it one);
  // else TORCHELASTIC_RUN_ID under torchrun, or SLURM_JOB_ID "." the step id under srun (names, not
  // secrets); empty when the launcher gives none.
  std::string job_id_variable;
  std::string job_id;
};

// From a variable -> value map. BadInput (one line naming the variable and the fix) for a value that is not
// a whole number, a negative one, a world size below 1 or above kMostProcesses, a rank not below its world
// size, a variable of the chosen launcher missing while its world size is set, a port outside 1..65535, or a
// PIPEWRIGHT_JOB_TOKEN of another length than kShortestJobToken..kLongestJobToken.
//
// Slurm's local world size: SLURM_NTASKS_PER_NODE when set (srun --ntasks-per-node), else this node's entry
// of SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE (the compressed form "2(x3),1": 2 tasks on each of
// the first 3 nodes, 1 on the fourth; at most kMostProcesses nodes) at index SLURM_NODEID (0 when unset),
// else the world size (one node).
LaunchEnv launch_env_from(const std::map<std::string, std::string>& env);

// The same from this process's environment.
LaunchEnv launch_env_from_process();

// "mpirun -np", "srun -n", "torchrun --nproc_per_node" (the flag that sets the world size), or "" for none.
std::string world_size_flag(const LaunchEnv& env);

}  // namespace pw
