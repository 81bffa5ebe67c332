#pragma once
// What a process of the TCP group (executor/tcp_process_group.hpp) shows process 0 before anything else it
// says is read: a digest of the job's id and the address the processes meet at. Which id:
//   PIPEWRIGHT_JOB_TOKEN   set by the user (16 to 4096 characters, the same for every process): a secret as
//                          long as the user keeps it one; the only source that keeps out someone who
//                          means harm.
//   TORCHELASTIC_RUN_ID    torchrun's run id (a fresh uuid under --standalone, else --rdzv-id): a name,
//   SLURM_JOB_ID.STEP_ID   and the job and step srun runs: public (squeue lists them). These tell one
//                          job's processes from another's, guarding against accidents (two jobs given the
//                          same MASTER_PORT), not against an adversary on the network.
//   neither                refused: MASTER_ADDR and MASTER_PORT alone are known to anyone who can reach them,
//                          and a token computed from them let an impostor take a rank (both real processes
//                          then failed at the timeout, blaming each other).
#include <string>

#include "executor/launch_env.hpp"
#include "executor/sha256.hpp"

namespace pw {

struct JobToken {
  Sha256 digest{};
  std::string source;  // the variable it came from, for messages: "PIPEWRIGHT_JOB_TOKEN", ...
};

// The token of `env`'s job meeting at host:port. BadInput naming PIPEWRIGHT_JOB_TOKEN when neither it nor a
// launcher's job id is set; `address_source` (where host:port came from: "MASTER_ADDR and MASTER_PORT",
// "--rendezvous HOST and --rendezvous PORT") names the address in that message.
JobToken job_token(const LaunchEnv& env, const std::string& host, int port,
                   const std::string& address_source = "MASTER_ADDR and MASTER_PORT");

// Whether `a` and the 32 bytes at `b` agree, in a time that does not depend on where they differ.
bool same_digest(const Sha256& a, const unsigned char* b);

}  // namespace pw
