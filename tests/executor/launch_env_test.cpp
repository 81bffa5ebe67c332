// Rank and world size from each launcher's variables, the precedence between launchers, and one exact line
// for every bad value.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "executor/launch_env.hpp"
#include "../error_text.hpp"

using namespace pw;

namespace {

using Env = std::map<std::string, std::string>;

// Replaces by a fresh entry: GCC 12 misreads assigning a short literal over a map's string (-Wrestrict).
void set(Env& env, const std::string& name, const std::string& value) {
  env.erase(name);
  env.emplace(name, value);
}

// The BadInput message launch_env_from() gives for `env` ("runtime error: ..." for any other kind).
std::string refusal_of(const Env& env) {
  return bad_input([&] { launch_env_from(env); });
}

const std::string kMpiFix = "mpirun sets it; start with mpirun -np N, or unset it to run as one process";
const std::string kSlurmFix = "srun sets it; start with srun -n N, or unset it to run as one process";
const std::string kTorchFix = "torchrun sets it; start with torchrun --nproc_per_node N, or unset it to run as one process";

}  // namespace

TEST_CASE("no launcher: rank 0 of 1") {
  const LaunchEnv e = launch_env_from({{"HOME", "/root"}, {"MASTER_PORT", "not a port"}});
  CHECK(e.launcher == "none");
  CHECK(e.rank == 0);
  CHECK(e.world_size == 1);
  CHECK(e.local_rank == 0);
  CHECK(e.local_world_size == 1);
  CHECK(e.master_addr.empty());
  CHECK(e.master_port == 0);  // ignored without a launcher
  CHECK(world_size_flag(e).empty());
}

TEST_CASE("OpenMPI's mpirun variables") {
  const LaunchEnv e = launch_env_from({{"OMPI_COMM_WORLD_RANK", "3"},
                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  CHECK(e.launcher == "openmpi");
  CHECK(e.rank == 3);
  CHECK(e.world_size == 4);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 2);
  CHECK(world_size_flag(e) == "mpirun -np");
  // Without the local variables: one node.
  const LaunchEnv one = launch_env_from({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  CHECK(one.local_rank == 1);
  CHECK(one.local_world_size == 2);
  // Whether someone chose this process's GPUs: CUDA_VISIBLE_DEVICES set and not empty.
  CHECK_FALSE(e.gpus_chosen);
  CHECK(launch_env_from({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"CUDA_VISIBLE_DEVICES", "3"}})
            .gpus_chosen);
  CHECK_FALSE(launch_env_from({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"CUDA_VISIBLE_DEVICES", ""}})
                  .gpus_chosen);
}

TEST_CASE("Slurm's srun variables, with tasks per node from each of its forms") {
  const Env base = {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "0"}};
  Env env = base;
  set(env, "SLURM_NTASKS_PER_NODE", "2");
  LaunchEnv e = launch_env_from(env);
  CHECK(e.launcher == "slurm");
  CHECK(e.rank == 5);
  CHECK(e.world_size == 7);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 2);
  CHECK(world_size_flag(e) == "srun -n");

  // "2(x3),1": 2 tasks on nodes 0, 1 and 2, one on node 3.
  env = base;
  set(env, "SLURM_TASKS_PER_NODE", "2(x3),1");
  set(env, "SLURM_NODEID", "2");
  CHECK(launch_env_from(env).local_world_size == 2);
  set(env, "SLURM_NODEID", "3");
  set(env, "SLURM_LOCALID", "0");
  CHECK(launch_env_from(env).local_world_size == 1);
  // The step's own list wins over the job's.
  set(env, "SLURM_STEP_TASKS_PER_NODE", "3(x4)");
  CHECK(launch_env_from(env).local_world_size == 3);
  // Neither: one node holds them all.
  CHECK(launch_env_from(base).local_world_size == 7);
  // SLURM_STEPID is the older spelling of the step id.
  Env old = base;
  old.erase("SLURM_STEP_ID");
  set(old, "SLURM_STEPID", "4");
  CHECK(launch_env_from(old).launcher == "slurm");
}

TEST_CASE("an sbatch script's own shell (no step id) is not a launched rank") {
  const LaunchEnv e = launch_env_from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_JOB_ID", "12"}});
  CHECK(e.launcher == "none");
  CHECK(e.world_size == 1);
}

TEST_CASE("torchrun's variables, with its rendezvous address") {
  const LaunchEnv e = launch_env_from({{"RANK", "6"},
                                       {"WORLD_SIZE", "8"},
                                       {"LOCAL_RANK", "2"},
                                       {"LOCAL_WORLD_SIZE", "4"},
                                       {"MASTER_ADDR", "node0"},
                                       {"MASTER_PORT", "29500"}});
  CHECK(e.launcher == "torchrun");
  CHECK(e.rank == 6);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 2);
  CHECK(e.local_world_size == 4);
  CHECK(e.master_addr == "node0");
  CHECK(e.master_port == 29500);
  CHECK(world_size_flag(e) == "torchrun --nproc_per_node");
}

TEST_CASE("precedence: OpenMPI over torchrun over Slurm") {
  const Env slurm = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}};
  Env torch_in_slurm = slurm;  // srun torchrun: one Slurm task per node, RANK per worker
  torch_in_slurm.insert({{"RANK", "3"}, {"WORLD_SIZE", "4"}});
  LaunchEnv e = launch_env_from(torch_in_slurm);
  CHECK(e.launcher == "torchrun");
  CHECK(e.rank == 3);
  Env mpi_in_slurm = slurm;  // mpirun inside an allocation inherits the batch step's SLURM_*
  mpi_in_slurm.insert({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}});
  e = launch_env_from(mpi_in_slurm);
  CHECK(e.launcher == "openmpi");
  CHECK(e.rank == 0);
  CHECK(e.world_size == 3);
}

TEST_CASE("each bad value is one line naming the variable and the fix") {
  CHECK(refusal_of({{"OMPI_COMM_WORLD_RANK", "one"}, {"OMPI_COMM_WORLD_SIZE", "2"}}) ==
         "OMPI_COMM_WORLD_RANK: 'one' is not a whole number; " + kMpiFix);
  CHECK(refusal_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2x"}}) ==
         "OMPI_COMM_WORLD_SIZE: '2x' is not a whole number; " + kMpiFix);
  CHECK(refusal_of({{"OMPI_COMM_WORLD_RANK", ""}, {"OMPI_COMM_WORLD_SIZE", "2"}}) ==
         "OMPI_COMM_WORLD_RANK: '' is not a whole number; " + kMpiFix);
  CHECK(refusal_of({{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}) ==
         "OMPI_COMM_WORLD_RANK: must be 0 or more, got -1; " + kMpiFix);
  CHECK(refusal_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}}) ==
         "OMPI_COMM_WORLD_SIZE: must be 1 or more, got 0; " + kMpiFix);
  CHECK(refusal_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}}) ==
         "OMPI_COMM_WORLD_RANK: 2 is not below OMPI_COMM_WORLD_SIZE 2; " + kMpiFix);
  CHECK(refusal_of({{"OMPI_COMM_WORLD_SIZE", "2"}}) ==
         "OMPI_COMM_WORLD_RANK: not set while OMPI_COMM_WORLD_SIZE is; " + kMpiFix);
  CHECK(refusal_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}) ==
         "OMPI_COMM_WORLD_LOCAL_RANK: 2 is not below OMPI_COMM_WORLD_LOCAL_SIZE 2; " + kMpiFix);

  const Env slurm = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}};
  auto with = [&](const Env& more) {
    Env e = slurm;
    for (const auto& [k, v] : more) e[k] = v;
    return e;
  };
  CHECK(refusal_of(with({{"SLURM_PROCID", "-3"}})) == "SLURM_PROCID: must be 0 or more, got -3; " + kSlurmFix);
  CHECK(refusal_of(with({{"SLURM_NTASKS", "two"}})) == "SLURM_NTASKS: 'two' is not a whole number; " + kSlurmFix);
  CHECK(refusal_of(with({{"SLURM_PROCID", "2"}})) == "SLURM_PROCID: 2 is not below SLURM_NTASKS 2; " + kSlurmFix);
  Env no_tasks = slurm;
  no_tasks.erase("SLURM_NTASKS");
  CHECK(refusal_of(no_tasks) == "SLURM_NTASKS: not set while SLURM_PROCID is; " + kSlurmFix);
  CHECK(refusal_of(with({{"SLURM_NTASKS_PER_NODE", "1"}, {"SLURM_LOCALID", "1"}})) ==
         "SLURM_LOCALID: 1 is not below SLURM_NTASKS_PER_NODE 1; " + kSlurmFix);
  CHECK(refusal_of(with({{"SLURM_TASKS_PER_NODE", "2(x"}})) ==
         "SLURM_TASKS_PER_NODE: '2(x' is not Slurm's tasks-per-node list such as 2(x3),1; " + kSlurmFix);
  CHECK(refusal_of(with({{"SLURM_TASKS_PER_NODE", "1(x2)"}, {"SLURM_NODEID", "2"}})) ==
         "SLURM_NODEID: 2 is not below the 2 nodes of SLURM_TASKS_PER_NODE '1(x2)'; " + kSlurmFix);
  CHECK(refusal_of(with({{"SLURM_TASKS_PER_NODE", "1(x2)"}, {"SLURM_LOCALID", "1"}})) ==
         "SLURM_LOCALID: 1 is not below this node's SLURM_TASKS_PER_NODE entry 1; " + kSlurmFix);

  CHECK(refusal_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}) == "RANK: 4 is not below WORLD_SIZE 4; " + kTorchFix);
  CHECK(refusal_of({{"RANK", "0"}, {"WORLD_SIZE", "-2"}}) == "WORLD_SIZE: must be 1 or more, got -2; " + kTorchFix);
  CHECK(refusal_of({{"WORLD_SIZE", "2"}}) == "RANK: not set while WORLD_SIZE is; " + kTorchFix);
  CHECK(refusal_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0.5"}}) ==
         "LOCAL_RANK: '0.5' is not a whole number; " + kTorchFix);
  CHECK(refusal_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}) ==
         "MASTER_PORT: 70000 is not a port (1 to 65535); set it to where rank 0 listens, or unset it");
  CHECK(refusal_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}}) ==
         "MASTER_PORT: must be 1 or more, got 0; set it to where rank 0 listens, or unset it");
  CHECK(refusal_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}}) ==
         "MASTER_ADDR: empty; set it to where rank 0 listens, or unset it");
}

TEST_CASE("counts from launcher variables are bounded before anything is sized by them") {
  const Env slurm = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}};
  auto with = [&](const Env& more) {
    Env e = slurm;
    for (const auto& [k, v] : more) e[k] = v;
    return e;
  };
  // Half a billion nodes of one task each: refused from the text alone, nothing expanded.
  CHECK(refusal_of(with({{"SLURM_TASKS_PER_NODE", "1(x500000000)"}})) ==
         "SLURM_TASKS_PER_NODE: '1(x500000000)' lists more than 1048576 nodes, the most pipewright joins; " + kSlurmFix);
  CHECK(refusal_of(with({{"SLURM_TASKS_PER_NODE", "2000000"}})) ==
         "SLURM_TASKS_PER_NODE: '2000000' lists more than 1048576 tasks on a node, the most pipewright joins; " + kSlurmFix);
  // Within the bound, a node far down the list is found without expanding it.
  CHECK(launch_env_from(with({{"SLURM_TASKS_PER_NODE", "2(x1000000),1"}, {"SLURM_NODEID", "1000000"}})).local_world_size ==
        1);
  CHECK(refusal_of(with({{"SLURM_NTASKS", "2000000"}})) ==
         "SLURM_NTASKS: 2000000 is beyond 1048576, the most processes pipewright joins; " + kSlurmFix);
  CHECK(refusal_of({{"RANK", "0"}, {"WORLD_SIZE", "1048577"}}) ==
         "WORLD_SIZE: 1048577 is beyond 1048576, the most processes pipewright joins; " + kTorchFix);
  CHECK(refusal_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "999999999"}}) ==
         "LOCAL_WORLD_SIZE: 999999999 is beyond 1048576, the most processes pipewright joins; " + kTorchFix);
}

TEST_CASE("the job's id: the user's token first, else what the launcher names the job by") {
  Env torch = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "a1b2"}};
  LaunchEnv e = launch_env_from(torch);
  CHECK(e.job_id_variable == "TORCHELASTIC_RUN_ID");
  CHECK(e.job_id == "a1b2");
  set(torch, "PIPEWRIGHT_JOB_TOKEN", "0123456789abcdef0123");
  e = launch_env_from(torch);
  CHECK(e.job_id_variable == "PIPEWRIGHT_JOB_TOKEN");
  CHECK(e.job_id == "0123456789abcdef0123");
  set(torch, "PIPEWRIGHT_JOB_TOKEN", "short");
  CHECK(refusal_of(torch) == "PIPEWRIGHT_JOB_TOKEN: 5 characters; a token has 16 to 4096, the same for every process of "
                             "the job, e.g. export PIPEWRIGHT_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')");

  e = launch_env_from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "3"}, {"SLURM_JOB_ID", "4711"}});
  CHECK(e.job_id_variable == "SLURM_JOB_ID");
  CHECK(e.job_id == "4711.3");
  // No launcher id (torchrun's variables set by hand): none, the address and port alone tell jobs apart.
  e = launch_env_from({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  CHECK(e.job_id_variable.empty());
  CHECK(e.job_id.empty());
  // A single process meets nobody: its token is not read.
  CHECK(launch_env_from({{"PIPEWRIGHT_JOB_TOKEN", "x"}}).job_id.empty());
}
