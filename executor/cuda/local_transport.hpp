#pragma once
// Several ranks on one GPU (or ranks of one process on several GPUs without NCCL): a mailbox per rank, as the
// thread transport has, but a tensor is copied device-to-device by the receiver, on its own copy stream into
// its own memory, with an event the receive polls under its deadline. The sender's tensor stays alive in the
// mailbox until that copy completed.
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <cuda_runtime.h>

#include "executor/cuda/device_memory.hpp"
#include "executor/transport.hpp"

namespace pw::cuda {

class LocalTransport : public Transport {
 public:
  explicit LocalTransport(int ranks);
  ~LocalTransport() override;
  // On rank `rank`'s thread with its device current, before its first receive.
  void attach(int rank, DeviceAllocator& allocator);

  void send(int src, int dst, const MessageKey& key, Message message) override;
  Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) override;
  void abort() override;

 private:
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<std::tuple<int, MessageKey>, Message> messages;
    DeviceAllocator* allocator = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t copied = nullptr;
  };
  std::vector<Mailbox> boxes_;
  std::atomic<bool> aborted_{false};
};

}  // namespace pw::cuda
