#pragma once
// A launcher's variables as launch_env_from() would read them, for the bootstrap and process-plan tests.
#include <string>

#include "executor/launch_env.hpp"

namespace pw::test {

inline LaunchEnv launched(const std::string& launcher, int rank, int world, int local_rank, int local_world,
                          const std::string& addr = "", int port = 0) {
  LaunchEnv e;
  e.launcher = launcher;
  e.rank = rank;
  e.world_size = world;
  e.local_rank = local_rank;
  e.local_world_size = local_world;
  e.master_addr = addr;
  e.master_port = port;
  // The job id each launcher hands its processes (the TCP meeting refuses a job without one).
  if (launcher == "torchrun") {
    e.job_id_variable = "TORCHELASTIC_RUN_ID";
    e.job_id = "run-1";
  } else if (launcher == "slurm") {
    e.job_id_variable = "SLURM_JOB_ID";
    e.job_id = "1234.0";
  }
  return e;
}

}  // namespace pw::test
