#pragma once
// A tensor message between processes as bytes: a fixed front (its key, flow id, send time and whether a
// tensor follows), then the tensor's own wire form. The MPI and TCP transports send the same bytes; both
// ends run the same build, so numbers travel as they lie in memory.
#include <cstddef>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "executor/backend.hpp"
#include "executor/transport.hpp"

namespace pw {

// `since`: the sender's last barrier, which the send time is counted from (clocks of two processes are not
// compared, the time since the last meeting is).
std::vector<std::byte> message_to_wire(const MessageKey& key, const Message& message, Clock::time_point since);

// The key and message from bytes message_to_wire wrote, the tensor rebuilt by `backend`, the send time
// counted from this process's last barrier `since`. Runtime error naming `from` for bytes too short, or a
// header no pipewright sends (not a SEND_F or SEND_B, a negative stage, micro-batch or exchange, a send time beyond a week).
struct WireMessage {
  MessageKey key;
  Message message;
};
WireMessage message_from_wire(std::span<const std::byte> bytes, const Backend& backend, Clock::time_point since, int from);

// The messages that arrived, by (source rank, key), until their receive takes them.
using Mailbox = std::map<std::tuple<int, MessageKey>, Message>;

// Moves the message from `src` with `key` out of `mailbox` into `out`; false when it has not arrived.
bool take_message(Mailbox& mailbox, int src, const MessageKey& key, Message& out);

}  // namespace pw
