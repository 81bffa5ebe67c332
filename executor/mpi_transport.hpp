#pragma once
// Tensors between processes over MPI: each send is one message holding its key, its send time and the
// tensor's wire bytes (Tensor::append_wire); the receiving backend rebuilds the tensor
// (Backend::tensor_from_wire). Messages that arrive before their receive wait in a mailbox by (sender, key),
// as ThreadTransport's do, so no tag arithmetic is needed and any number of micro-batches fits.
#include <map>
#include <tuple>

#include "executor/message_wire.hpp"
#include "executor/mpi_world.hpp"
#include "executor/transport.hpp"

namespace pw {

class MpiTransport : public Transport {
 public:
  // `backend` rebuilds what arrives; both outlive the transport.
  MpiTransport(MpiWorld& world, const Backend& backend) : world_(world), backend_(backend) {}
  // `src` must be this process's rank: a process hosts one rank.
  void send(int src, int dst, const MessageKey& key, Message message) override;
  Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) override;
  void abort() override { world_.abort(); }
  void announce_failure(const std::string& message) override { world_.announce_failure(message); }

 private:
  void take_arrivals_locked();

  MpiWorld& world_;
  const Backend& backend_;
  Mailbox mailbox_;
};

}  // namespace pw
