#include "executor/cuda/local_transport.hpp"

#include "core/error.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/device_wait.hpp"

namespace pw::cuda {

LocalTransport::LocalTransport(int ranks) : boxes_(static_cast<size_t>(ranks)) {}

LocalTransport::~LocalTransport() {
  for (Mailbox& box : boxes_) {
    box.messages.clear();
    if (box.copied) cudaEventDestroy(box.copied);
    if (box.stream) cudaStreamDestroy(box.stream);
  }
}

void LocalTransport::attach(int rank, DeviceAllocator& allocator) {
  Mailbox& box = boxes_.at(static_cast<size_t>(rank));
  box.allocator = &allocator;
  PW_CUDA(cudaStreamCreateWithFlags(&box.stream, cudaStreamNonBlocking));
  PW_CUDA(cudaEventCreateWithFlags(&box.copied, cudaEventDisableTiming));
}

void LocalTransport::send(int src, int dst, const MessageKey& key, Message message) {
  Mailbox& box = boxes_.at(static_cast<size_t>(dst));
  {
    std::lock_guard lock(box.mutex);
    box.messages[{src, key}] = std::move(message);
  }
  box.arrived.notify_all();
}

Message LocalTransport::recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) {
  Mailbox& box = boxes_.at(static_cast<size_t>(dst));
  if (!box.allocator) throw_runtime("local transport: rank {} receives before it attached", dst);
  Message m;
  {
    std::unique_lock lock(box.mutex);
    const std::tuple<int, MessageKey> id{src, key};
    for (;;) {
      if (aborted_) throw RunAborted();
      auto it = box.messages.find(id);
      if (it != box.messages.end()) {
        m = std::move(it->second);
        box.messages.erase(it);
        break;
      }
      // Short waits: abort() sets a flag without taking every mailbox's lock.
      const auto until = std::min(deadline, Clock::now() + std::chrono::milliseconds(10));
      box.arrived.wait_until(lock, until);
      if (Clock::now() >= deadline && box.messages.find(id) == box.messages.end()) throw RecvTimeout();
    }
  }
  if (!m.tensor) return m;
  const auto& source = static_cast<const DeviceTensor&>(*m.tensor);
  auto copy = std::make_shared<DeviceTensor>(*box.allocator, source.dtype(), source.rows(), source.cols());
  PW_CUDA(cudaMemcpyPeerAsync(copy->data(), copy->device(), source.data(), source.device(),
                              static_cast<std::size_t>(source.bytes()), box.stream));
  PW_CUDA(cudaEventRecord(box.copied, box.stream));
  wait_event(box.copied, deadline, &aborted_, nullptr);
  m.tensor = std::move(copy);  // the sender's tensor goes back to its pool now that the copy is done
  return m;
}

void LocalTransport::abort() {
  aborted_ = true;
  for (Mailbox& box : boxes_) box.arrived.notify_all();
}

}  // namespace pw::cuda
