#pragma once
// The MPI side of a process group (only mpi_*.cpp include this: it needs <mpi.h>). One communicator, duplicated
// from MPI_COMM_WORLD with errors returned rather than fatal, carries four kinds of point-to-point messages
// (tensors, failure notices, gathered records, broadcast bytes) and the barriers. Every wait polls with non-blocking calls
// (MPI_Improbe, MPI_Test) and a short pause, so none can hang past its deadline or miss a failure notice.
#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <mutex>
#include <string>
#include <vector>

#include "executor/backend.hpp"
#include "executor/wait_notice.hpp"

namespace pw {

enum MpiTag : int { kTensorTag = 1, kFailureTag = 2, kGatherTag = 3, kBroadcastTag = 4, kWaitTag = 5 };

// A received message's bytes. Not a std::vector: a receive buffer as large as a tensor need not be zeroed
// before MPI writes it.
struct MpiBytes {
  std::unique_ptr<std::byte[]> data;
  size_t size = 0;
  std::span<const std::byte> view() const { return {data.get(), size}; }
};

// Throws Runtime "<call>: <MPI's error text>" unless `code` is MPI_SUCCESS.
void mpi_check(int code, const char* call);

class MpiWorld {
 public:
  // MPI_Init_thread, the communicator, and every process's pid and host (at most `timeout_s` for the others).
  explicit MpiWorld(double timeout_s);
  // Completes the sends still in flight (bounded), then MPI_Finalize.
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }
  // Serialises MPI calls between the threads of this process (MPI_THREAD_SERIALIZED).
  std::mutex& mutex() { return mutex_; }

  // Polls `done` (called with the mutex held) until it returns true. Between polls: a failure notice from
  // another process throws PeerFailed; abort() throws RunAborted; a peer on this host whose process is gone
  // throws PeerLost here if this is the lowest-numbered live process (others keep waiting for its notice);
  // past `deadline`, RecvTimeout, or PeerStalled naming the rank that stalled: what the wait is for (`on`:
  // a rank or kAtMeeting, `what`) is told to the others once it lasts (executor/wait_notice.hpp).
  void wait(Clock::time_point deadline, const std::function<bool()>& done, int on = kNotWaiting,
            const std::string& what = "");

  // Sends `bytes` to `dst` without waiting; the buffer lives until MPI is done with it.
  void send(int dst, MpiTag tag, std::vector<std::byte> bytes);
  // The next message with `tag` from `src` (MPI_ANY_SOURCE: any) if one has arrived whole; *from is its
  // sender. Must be called with the mutex held.
  bool try_receive(int src, MpiTag tag, MpiBytes& out, int* from = nullptr);

  // Tells every other live process that this one failed with `message`; never waits.
  void announce_failure(const std::string& message);
  void abort() { aborted_ = true; }
  // The destructor will skip MPI_Finalize (it waits for every process): for a process about to end the job.
  void leave_without_finalize() { finalize_ = false; }

  // When this process last left a barrier: send times travel relative to it, so that timestamps from
  // another host (another clock) land on this one's timeline.
  Clock::time_point last_meeting() const { return last_meeting_; }
  void set_last_meeting(Clock::time_point t) { last_meeting_ = t; }

  // "pid 1234 on host".
  std::string describe(int rank) const;

 private:
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> bytes;
  };
  struct Incoming {
    MPI_Request request = MPI_REQUEST_NULL;
    int source = 0;
    MpiTag tag = kTensorTag;
    MpiBytes bytes;
  };
  void progress_locked();  // completes finished sends and starts/finishes receives of matched messages
  void check_notices_locked();
  void take_wait_notices_locked();
  void tell_locked(const WaitNotice& notice);  // to every other live process, without waiting
  bool check_peers();  // marks peers on this host whose process is gone; whether any is (now or before)

  int rank_ = 0;
  int size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::mutex mutex_;
  std::atomic<bool> aborted_{false};
  Clock::time_point last_meeting_ = Clock::now();
  std::vector<int> pids_;
  std::vector<std::string> hosts_;
  std::vector<bool> same_machine_;  // whose pid this process can look up
  std::vector<bool> lost_;
  WaitBoard board_{1};
  std::list<Pending> sends_;
  std::list<Incoming> incoming_;        // receives under way
  std::list<Incoming> arrived_;         // received whole, not yet taken
  bool announced_ = false;
  bool finalize_ = true;
  Clock::time_point next_peer_check_{};
  Clock::duration spin_{};  // how long a wait yields before it sleeps
};

}  // namespace pw
