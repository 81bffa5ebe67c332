#pragma once
// The processes of one run that a launcher (mpirun, srun, torchrun) started, one pipeline rank each (the process's
// index is its rank): what the runtime needs of them besides moving tensors: meeting, gathering every rank's
// records at process 0, ending the whole job. Every wait is bounded by a deadline and ends early when
// another process announces a failure (PeerFailed) or, on the same host, when a peer's process is gone
// (PeerLost, raised by the lowest-numbered live process only, so that one process reports it; "same host":
// the same boot id and pid namespace, where a peer's pid can be looked up).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "executor/launch_env.hpp"
#include "executor/transport.hpp"

namespace pw {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Moves tensors between the processes (its ranks are the processes' indices); `backend` rebuilds the
  // tensors that arrive and outlives the transport.
  virtual std::unique_ptr<Transport> transport_for(const Backend& backend) = 0;
  // Returns when every process has arrived, at the local time this one learnt so. RecvTimeout past
  // `deadline`; PeerFailed, PeerLost and RunAborted as the transport's receive.
  virtual Clock::time_point barrier(Clock::time_point deadline) = 0;
  // Process 0 gets every process's bytes in process order (its own included); the others get nothing back.
  // Waits as barrier() does.
  virtual std::vector<std::vector<std::byte>> gather(std::vector<std::byte> bytes, Clock::time_point deadline) = 0;
  // Every process gets process 0's `bytes` (the others' are ignored). Waits as barrier() does. Default: Runtime
  // error (a group that cannot broadcast).
  virtual std::vector<std::byte> broadcast(std::vector<std::byte> bytes, Clock::time_point deadline);
  // The process that announced the failure this one learned of ("process 1 (pid 4242 on node-3)"), where the
  // group knows it; "" otherwise.
  virtual std::string failure_origin() const { return ""; }
};

// The meeting every process of a launched job holds before it lets go of the group: none ends while another
// still waits on it, so a peer that is gone is always one that failed. On a failure here (a peer's, a
// timeout, a lost process) it prints the one line that says so, if it is this process's to say, and ends
// the job (exit 1); it returns when everyone arrived.
void meet_before_leaving(ProcessGroup& group, double timeout_s);

// Whether this build can join processes (PIPEWRIGHT_HAVE_MPI).
bool built_with_mpi();

// Joins the processes `env`'s launcher started, waiting at most `timeout_s` for them: over MPI under mpirun,
// and under srun when this build has MPI (initialises MPI; destroying the group finalises it); over TCP at
// MASTER_ADDR under torchrun, and under srun without MPI (executor/tcp_process_group.hpp). One group per
// process, for its whole life. BadInput without a launcher, for mpirun in a build without MPI, when MPI's
// world disagrees with the launcher's variables, or when the TCP group's MASTER_ADDR / MASTER_PORT are unset.
std::unique_ptr<ProcessGroup> join_launched_processes(const LaunchEnv& env, double timeout_s);

// Ends this process with exit status `code` at once and every process of the job with it: once MPI is up by
// MPI_Abort (the launcher tears the rest down); while a TCP group lives by a word to the others, which end
// with the same status as it arrives.
[[noreturn]] void end_job_now(int code);

}  // namespace pw
