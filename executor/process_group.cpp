#include "executor/process_group.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace pw {

std::vector<std::byte> ProcessGroup::broadcast(std::vector<std::byte>, Clock::time_point) {
  throw_runtime("this process group cannot broadcast");
}

#ifndef PIPEWRIGHT_HAVE_MPI
bool built_with_mpi() { return false; }

std::unique_ptr<ProcessGroup> join_launched_processes(const LaunchEnv& env, double) {
  throw_bad_input("{}: this pipewright was built without MPI, which ranks as processes talk over; install "
                  "libopenmpi-dev and rebuild with -DPIPEWRIGHT_MPI=ON, or run one process (ranks as threads)",
                  env.launcher);
}

void end_job_now(int code) { std::_Exit(code); }
#endif

}  // namespace pw
