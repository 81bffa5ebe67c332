#include "executor/process_group.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"
#include "executor/tcp_process_group.hpp"

namespace pw {

std::vector<std::byte> ProcessGroup::broadcast(std::vector<std::byte>, Clock::time_point) {
  throw_runtime("this process group cannot broadcast");
}

void meet_before_leaving(ProcessGroup& group, double timeout_s) {
  const int me = group.rank();
  // One write, then a moment for the launcher to pass the line on before its abort banner.
  const auto report = [](const std::string& line) {
    std::cerr << line;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    end_job_now(1);
  };
  try {
    group.barrier(Clock::now() +
                  std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s)));
  } catch (const PeerFailed&) {
    std::this_thread::sleep_for(std::chrono::seconds(10));  // the failing process reports and ends the job
    end_job_now(1);
  } catch (const PeerLost& e) {
    report(fmt::format("error: rank {} failed: its process ({}) ended while rank {} waited at the end of the run\n",
                       e.rank, e.process, me));
  } catch (const RecvTimeout&) {
    report(fmt::format("error: rank {} failed at the end of the run: the other ranks did not arrive within {:g} s\n", me,
                       timeout_s));
  } catch (const std::exception& e) {
    report(fmt::format("error: rank {} failed at the end of the run: {}\n", me, e.what()));
  }
}

#ifndef PIPEWRIGHT_HAVE_MPI
bool built_with_mpi() { return false; }

// torchrun's and srun's processes meet over TCP; mpirun's expect MPI.
std::unique_ptr<ProcessGroup> join_launched_processes(const LaunchEnv& env, double timeout_s) {
  if (env.launcher == "torchrun" || env.launcher == "slurm") return join_tcp_processes(env, timeout_s);
  if (env.launcher == "none")
    throw_bad_input("launcher: none started this process; start the processes with torchrun --nproc_per_node N (or "
                    "srun -n N), or run one process (ranks as threads)");
  throw_bad_input("{}: this pipewright was built without MPI, which the processes mpirun starts talk over; install "
                  "libopenmpi-dev and rebuild with -DPIPEWRIGHT_MPI=ON, start them with torchrun --nproc_per_node N, "
                  "or run one process (ranks as threads)",
                  env.launcher);
}

void end_job_now(int code) {
  std::fflush(nullptr);
  end_tcp_job(code);
  std::_Exit(code);
}
#endif

}  // namespace pw
