#include "executor/job_token.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

JobToken job_token(const LaunchEnv& env, const std::string& host, int port, const std::string& address_source) {
  // The address alone is known to anyone who can reach it: an impostor computing the token could take a rank.
  if (env.job_id_variable.empty())
    throw_bad_input("PIPEWRIGHT_JOB_TOKEN: not set, and the launcher gives no job id (TORCHELASTIC_RUN_ID, "
                    "SLURM_JOB_ID): with {} alone anyone who can reach {}:{} could join as a rank; export one token "
                    "to every process of the job, e.g. export PIPEWRIGHT_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | "
                    "tr -d ' \\n')",
                    address_source, host, port);
  JobToken t;
  t.source = env.job_id_variable;
  t.digest = sha256(fmt::format("pipewright job token 1\n{}\n{}\n{}:{}", env.job_id_variable, env.job_id, host, port));
  return t;
}

bool same_digest(const Sha256& a, const unsigned char* b) {
  unsigned char differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

}  // namespace pw
