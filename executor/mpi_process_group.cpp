// The process group over MPI (built with PIPEWRIGHT_HAVE_MPI only; process_group.cpp stands in otherwise).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <thread>

#include "core/error.hpp"
#include "executor/mpi_transport.hpp"
#include "executor/mpi_world.hpp"
#include "executor/process_group.hpp"
#include "executor/tcp_process_group.hpp"

namespace pw {
namespace {

class MpiProcessGroup : public ProcessGroup {
 public:
  MpiProcessGroup(double timeout_s) : timeout_s_(timeout_s), world_(timeout_s) {}

  // Every process meets once more before MPI_Finalize: none ends while another still waits on it, so a
  // process that is gone is always one that failed.
  // Left by an exception (join_launched_processes refusing the world): the caller ends the job, MPI stays up.
  ~MpiProcessGroup() override {
    if (std::uncaught_exceptions() > 0) {
      world_.leave_without_finalize();
      return;
    }
    meet_before_leaving(*this, timeout_s_);
  }

  int rank() const override { return world_.rank(); }
  int size() const override { return world_.size(); }

  std::unique_ptr<Transport> transport_for(const Backend& backend) override {
    return std::make_unique<MpiTransport>(world_, backend);
  }

  Clock::time_point barrier(Clock::time_point deadline) override {
    MPI_Request request = MPI_REQUEST_NULL;
    {
      std::lock_guard lock(world_.mutex());
      mpi_check(MPI_Ibarrier(world_.comm(), &request), "MPI_Ibarrier");
    }
    world_.wait(
        deadline,
        [&] {
          int done = 0;
          mpi_check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
          return done != 0;
        },
        kAtMeeting, "the meeting");
    const Clock::time_point now = Clock::now();
    world_.set_last_meeting(now);
    return now;
  }

  std::vector<std::vector<std::byte>> gather(std::vector<std::byte> bytes, Clock::time_point deadline) override {
    std::vector<std::vector<std::byte>> out;
    if (world_.rank() != 0) {
      world_.send(0, kGatherTag, std::move(bytes));
      return out;
    }
    out.resize(static_cast<size_t>(world_.size()));
    out[0] = std::move(bytes);
    for (int r = 1; r < world_.size(); ++r) {
      MpiBytes received;
      world_.wait(deadline, [&] { return world_.try_receive(r, kGatherTag, received); });
      out[static_cast<size_t>(r)].assign(received.data.get(), received.data.get() + received.size);
    }
    return out;
  }

  std::vector<std::byte> broadcast(std::vector<std::byte> bytes, Clock::time_point deadline) override {
    if (world_.rank() == 0) {
      for (int r = 1; r < world_.size(); ++r) world_.send(r, kBroadcastTag, bytes);
      return bytes;
    }
    MpiBytes received;
    world_.wait(deadline, [&] { return world_.try_receive(0, kBroadcastTag, received); });
    return {received.data.get(), received.data.get() + received.size};
  }

 private:
  double timeout_s_;
  MpiWorld world_;
};

}  // namespace

bool built_with_mpi() { return true; }

// mpirun's and srun's processes meet over MPI; torchrun starts no MPI world, so its processes meet over TCP.
std::unique_ptr<ProcessGroup> join_launched_processes(const LaunchEnv& env, double timeout_s) {
  if (env.launcher == "torchrun") return join_tcp_processes(env, timeout_s);
  if (env.launcher != "openmpi" && env.launcher != "slurm")
    throw_bad_input("launcher: none started this process; start the processes with mpirun -np N, srun -n N or torchrun "
                    "--nproc_per_node N, or run one process (ranks as threads)");
  auto group = std::make_unique<MpiProcessGroup>(timeout_s);
  if (group->size() != env.world_size || group->rank() != env.rank)
    throw_bad_input("{}: the launcher says rank {} of {}, MPI says rank {} of {}; start the processes with the "
                    "launcher of the MPI this pipewright was built with",
                    env.launcher, env.rank, env.world_size, group->rank(), group->size());
  return group;
}

void end_job_now(int code) {
  std::fflush(nullptr);
  end_tcp_job(code);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace pw
