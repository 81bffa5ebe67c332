#include "executor/job_token.hpp"

#include <fmt/format.h>

namespace pw {

JobToken job_token(const LaunchEnv& env, const std::string& host, int port, const std::string& address_source) {
  JobToken t;
  t.source = env.job_id_variable.empty() ? address_source : env.job_id_variable;
  t.digest = sha256(fmt::format("pipewright job token 1\n{}\n{}\n{}:{}", env.job_id_variable, env.job_id, host, port));
  return t;
}

bool same_digest(const Sha256& a, const unsigned char* b) {
  unsigned char differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

}  // namespace pw
