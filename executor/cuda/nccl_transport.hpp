#pragma once
// NCCL send/receive between ranks on different GPUs, in this process or others. Each channel of the
// schedule's CommPlan (executor/cuda/host/comm_plan.hpp) is a two-rank communicator split from the world
// one, with a stream at each end: messages flow one way, in the sender's order, and a receive posts every
// earlier message of its channel first (in one NCCL group). Sends return at once (the tensor is kept
// until NCCL is done with it); a receive waits for its data under the run's deadline, checking NCCL's
// asynchronous error state, so a dead peer ends the run with an error instead of a hang. Communicators
// are nonblocking; at the end they are finalised, or aborted when the run failed.
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "executor/cuda/device_memory.hpp"
#include "executor/cuda/host/comm_plan.hpp"
#include "executor/cuda/host/rendezvous.hpp"
#include "executor/transport.hpp"

namespace pw::cuda {

class NcclTransport : public Transport {
 public:
  // Every message is a rows x cols matrix of `dtype` (a stage boundary's activation or its gradient).
  // `tied`: the two ranks holding the copies of a tied embedding matrix, when they differ; they get a
  // communicator of their own for exchange_tied.
  NcclTransport(const Schedule& lowered, DType dtype, long rows, long cols, std::pair<int, int> tied = {-1, -1});
  ~NcclTransport() override;

  // On rank `rank`'s thread with its GPU current: joins the world communicator of `world` ranks made from
  // `id`, then splits every channel from it, in the plan's order (collective: every rank of every process
  // calls it). Polls until `deadline`; `stop` ends the wait with RunAborted.
  void connect(int rank, int world, const UniqueIdBytes& id, DeviceAllocator& allocator, Clock::time_point deadline,
               const std::atomic<bool>* stop);

  // On a tied rank's thread: sends `bytes` from `mine` to the other tied rank and receives its bytes into
  // `into`, in one NCCL group, waiting under `deadline` (RecvTimeout; RunAborted once aborted).
  void exchange_tied(int rank, const void* mine, void* into, std::size_t bytes, Clock::time_point deadline);

  void send(int src, int dst, const MessageKey& key, Message message) override;
  Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) override;
  void abort() override;

 private:
  struct Posted {
    TensorPtr tensor;
    std::shared_ptr<cudaEvent_t> done;  // shared by the receives of one group
  };
  struct InFlight {
    TensorPtr tensor;
    cudaEvent_t done = nullptr;
  };
  struct RankState {
    int rank = 0;
    int device = 0;
    DeviceAllocator* allocator = nullptr;
    ncclComm_t world = nullptr;
    std::vector<ncclComm_t> comms;      // per channel; null where the rank is neither end
    std::vector<cudaStream_t> streams;  // per channel, likewise
    std::vector<ReceiveCursor> cursors;
    std::vector<long> sent;  // messages sent per channel so far
    std::map<std::pair<int, long>, Posted> posted;  // (channel, global position) -> receive in progress
    std::deque<InFlight> in_flight;
    ncclComm_t tied = nullptr;  // the tied pair's communicator (a member only)
    cudaStream_t tied_stream = nullptr;
  };
  RankState& state(int rank);
  void reap(RankState& s, bool all, Clock::time_point deadline);
  std::size_t message_bytes() const;

  CommPlan plan_;
  DType dtype_;
  long rows_, cols_;
  std::pair<int, int> tied_;
  std::vector<std::unique_ptr<RankState>> ranks_;
  std::atomic<bool> aborted_{false};
  std::mutex info_mutex_;
  std::map<std::pair<int, MessageKey>, std::pair<Clock::time_point, long>> sent_info_;  // in-process senders' stamps
};

// A fresh NCCL unique id as bytes.
UniqueIdBytes nccl_unique_id();

}  // namespace pw::cuda
