#include "executor/mpi_transport.hpp"

#include <cstring>

#include "core/error.hpp"
#include "executor/message_wire.hpp"

namespace pw {

void MpiTransport::send(int src, int dst, const MessageKey& key, Message message) {
  if (src != world_.rank())
    throw_runtime("rank {} cannot send from process {}: a process hosts one rank", src, world_.rank());
  world_.send(dst, kTensorTag, message_to_wire(key, message, world_.last_meeting()));
}

void MpiTransport::take_arrivals_locked() {
  MpiBytes received;
  int from = 0;
  while (world_.try_receive(MPI_ANY_SOURCE, kTensorTag, received, &from)) {
    WireMessage w = message_from_wire(received.view(), backend_, world_.last_meeting(), from);
    mailbox_[{from, w.key}] = std::move(w.message);
  }
}

Message MpiTransport::recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) {
  if (dst != world_.rank())
    throw_runtime("rank {} cannot receive in process {}: a process hosts one rank", dst, world_.rank());
  Message out;
  world_.wait(
      deadline,
      [&] {
        take_arrivals_locked();
        return take_message(mailbox_, src, key, out);
      },
      src, to_text(Action{key.op, key.stage, key.microbatch}));
  return out;
}

}  // namespace pw
