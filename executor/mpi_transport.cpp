#include "executor/mpi_transport.hpp"

#include <cstring>

#include "core/error.hpp"

namespace pw {
namespace {

// Fixed-size front of every tensor message (both ends run the same build).
struct WireHeader {
  std::int32_t iteration = 0;
  std::int32_t op = 0;
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  std::int64_t flow_id = -1;
  std::int64_t sent_ns = 0;  // since the sender's last barrier
  std::int32_t has_tensor = 0;
  std::int32_t padding = 0;
};

}  // namespace

void MpiTransport::send(int src, int dst, const MessageKey& key, Message message) {
  if (src != world_.rank())
    throw_runtime("rank {} cannot send from process {}: a process hosts one rank", src, world_.rank());
  WireHeader h;
  h.iteration = key.iteration;
  h.op = static_cast<std::int32_t>(key.op);
  h.stage = key.stage;
  h.microbatch = key.microbatch;
  h.flow_id = message.flow_id;
  h.sent_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(message.sent - world_.last_meeting()).count();
  h.has_tensor = message.tensor ? 1 : 0;
  std::vector<std::byte> bytes(sizeof(WireHeader));
  std::memcpy(bytes.data(), &h, sizeof(WireHeader));
  if (message.tensor) bytes.reserve(sizeof(WireHeader) + 64 + static_cast<size_t>(message.tensor->bytes()));
  if (message.tensor) message.tensor->append_wire(bytes);
  world_.send(dst, kTensorTag, std::move(bytes));
}

void MpiTransport::take_arrivals_locked() {
  MpiBytes received;
  int from = 0;
  while (world_.try_receive(MPI_ANY_SOURCE, kTensorTag, received, &from)) {
    const std::span<const std::byte> bytes = received.view();
    if (bytes.size() < sizeof(WireHeader))
      throw_runtime("a message of {} bytes from rank {} is too short for a tensor's header", bytes.size(), from);
    WireHeader h;
    std::memcpy(&h, bytes.data(), sizeof(WireHeader));
    Message m;
    m.flow_id = h.flow_id;
    m.sent = world_.last_meeting() + std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(h.sent_ns));
    if (h.has_tensor)
      m.tensor = backend_.tensor_from_wire(bytes.subspan(sizeof(WireHeader)));
    const MessageKey key{h.iteration, static_cast<Op>(h.op), h.stage, h.microbatch};
    mailbox_[{from, key}] = std::move(m);
  }
}

Message MpiTransport::recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) {
  if (dst != world_.rank())
    throw_runtime("rank {} cannot receive in process {}: a process hosts one rank", dst, world_.rank());
  const std::tuple<int, MessageKey> id{src, key};
  Message out;
  world_.wait(deadline, [&] {
    take_arrivals_locked();
    auto it = mailbox_.find(id);
    if (it == mailbox_.end()) return false;
    out = std::move(it->second);
    mailbox_.erase(it);
    return true;
  });
  return out;
}

}  // namespace pw
