#include "executor/message_wire.hpp"

#include <cstdint>
#include <cstring>

#include "core/error.hpp"

namespace pw {
namespace {

struct WireHeader {
  std::int32_t iteration = 0;
  std::int32_t op = 0;
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  std::int64_t flow_id = -1;
  std::int64_t sent_ns = 0;  // since the sender's last barrier
  std::int32_t has_tensor = 0;
  std::int32_t exchange = 0;
};

// A send time further than a week from the last meeting is no send of this run.
constexpr std::int64_t kLongestSendNs = 7LL * 24 * 3600 * 1'000'000'000;

}  // namespace

std::vector<std::byte> message_to_wire(const MessageKey& key, const Message& message, Clock::time_point since) {
  WireHeader h;
  h.iteration = key.iteration;
  h.op = static_cast<std::int32_t>(key.op);
  h.stage = key.stage;
  h.microbatch = key.microbatch;
  h.flow_id = message.flow_id;
  h.sent_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(message.sent - since).count();
  h.has_tensor = message.tensor ? 1 : 0;
  h.exchange = key.exchange;
  std::vector<std::byte> bytes(sizeof(WireHeader));
  std::memcpy(bytes.data(), &h, sizeof(WireHeader));
  if (message.tensor) {
    bytes.reserve(sizeof(WireHeader) + 64 + static_cast<size_t>(message.tensor->bytes()));
    message.tensor->append_wire(bytes);
  }
  return bytes;
}

WireMessage message_from_wire(std::span<const std::byte> bytes, const Backend& backend, Clock::time_point since, int from) {
  if (bytes.size() < sizeof(WireHeader))
    throw_runtime("a message of {} bytes from rank {} is too short for a tensor's header", bytes.size(), from);
  WireHeader h;
  std::memcpy(&h, bytes.data(), sizeof(WireHeader));
  // Only a SEND_F or SEND_B of a real stage and micro-batch is ever sent; anything else would sit in the
  // mailbox unmatched or, for the send time, overflow the clock.
  const bool send_op = h.op == static_cast<std::int32_t>(Op::SendF) || h.op == static_cast<std::int32_t>(Op::SendB);
  if (!send_op || h.iteration < 0 || h.stage < 0 || h.microbatch < 0 || h.exchange < 0 ||
      (h.has_tensor != 0 && h.has_tensor != 1) ||
      h.sent_ns < -kLongestSendNs || h.sent_ns > kLongestSendNs)
    throw_runtime("a message from rank {} has a header no pipewright sends (operation {}, iteration {}, stage {}, "
                  "micro-batch {}); the processes run different builds?",
                  from, h.op, h.iteration, h.stage, h.microbatch);
  WireMessage w;
  w.key = MessageKey{h.iteration, static_cast<Op>(h.op), h.stage, h.microbatch, h.exchange};
  w.message.flow_id = h.flow_id;
  w.message.sent = since + std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(h.sent_ns));
  if (h.has_tensor) w.message.tensor = backend.tensor_from_wire(bytes.subspan(sizeof(WireHeader)));
  return w;
}

bool take_message(Mailbox& mailbox, int src, const MessageKey& key, Message& out) {
  auto it = mailbox.find({src, key});
  if (it == mailbox.end()) return false;
  out = std::move(it->second);
  mailbox.erase(it);
  return true;
}

}  // namespace pw
