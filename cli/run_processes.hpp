#pragma once
// `pipewright run` as one of the processes a launcher started (mpirun -np N pipewright run ..., torchrun,
// srun): every process builds the same configuration, runs its own rank, and process 0 alone reports. Errors are printed
// once and end the whole job: bad input every process meets alike by process 0, a run failure by the
// process where it happened (the others learn of it and stay quiet); the exit status is the error's
// (2 bad input, 1 runtime), and end_job_now ends the other processes too (MPI_Abort, or the TCP group's word).
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "executor/launch_env.hpp"
#include "executor/process_group.hpp"
#include "executor/runtime.hpp"

namespace pw {

class LaunchedRun {
 public:
  LaunchedRun(const LaunchEnv& env, ProcessGroup& group, double timeout_s)
      : env_(env), group_(group), timeout_s_(timeout_s) {}

  // Only process 0 prints and writes files.
  bool reports() const { return group_.rank() == 0; }
  // "processes under openmpi": how the report's second line says the ranks ran.
  std::string ranks_as() const { return "processes under " + env_.launcher; }
  // BadInput naming --pp (--dp with replicas) and the launcher's flag unless it started one process per
  // pipeline rank of each data-parallel replica.
  void check_ranks(int ranks, int replicas = 1) const;
  // This process's rank of the schedule; at process 0 every rank's records.
  RunResult run(const Schedule& schedule, Backend& backend, const RunOptions& options);
  // This process's ranks `local_ranks` of the schedule, as threads, over `transport` (the cuda backend's:
  // processes that hold several ranks each); at process 0 every rank's records.
  RunResult run(const Schedule& schedule, Backend& backend, const RunOptions& options, Transport& transport,
                const std::vector<int>& local_ranks);
  // At process 0: the mean of the losses of the processes holding the last stage; elsewhere `local`.
  std::vector<double> losses(const std::vector<double>& local);
  const LaunchEnv& env() const { return env_; }
  ProcessGroup& group() { return group_; }

 private:
  LaunchEnv env_;
  ProcessGroup& group_;
  double timeout_s_;
};

// A runtime error every process meets alike (no GPU on the machine): process 0 reports it; another process
// reports it only when process 0 has not ended the job within a few seconds (it did not meet it).
class ErrorOfEveryProcess : public Error {
 public:
  explicit ErrorOfEveryProcess(const std::string& message) : Error(ErrorKind::Runtime, message) {}
};

// Joins the launched job (join_launched_processes: MPI or TCP) and runs `body` as this process's part of it; on any error prints it once as
// "error: <message>" on stderr and ends the job (does not return). `out` is flushed before the group closes.
void run_launched(const LaunchEnv& env, double timeout_s, std::ostream& out,
                  const std::function<void(LaunchedRun&)>& body);

}  // namespace pw
