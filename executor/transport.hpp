#pragma once
// Moves tensors between ranks. A message is keyed by the action that sends it (SEND_F or SEND_B of a stage
// and micro-batch, in an iteration), so a receive can only match its own send.
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "executor/backend.hpp"
#include "executor/core_turns.hpp"

namespace pw {

struct MessageKey {
  int iteration = 0;
  Op op = Op::SendF;  // SendF or SendB
  int stage = 0;      // the sending stage
  int microbatch = 0;
  // 0: the stage's own SEND_F or SEND_B; n > 0: the n-th collective exchange (Collectives) of the sending
  // rank in this iteration, made during the action on `stage` and `microbatch`.
  int exchange = 0;

  friend auto operator<=>(const MessageKey&, const MessageKey&) = default;
};

struct Message {
  TensorPtr tensor;
  Clock::time_point sent{};  // when the sender handed it over
  long flow_id = -1;         // ties the send to its receive in the trace
};

// A receive waited past its deadline.
struct RecvTimeout : std::exception {
  const char* what() const noexcept override { return "receive timed out"; }
};

// A rank in another process failed and said so (`message` is its error); this rank stops quietly.
struct PeerFailed : RunAborted {
  explicit PeerFailed(std::string message) : message(std::move(message)) {}
  const char* what() const noexcept override { return message.c_str(); }
  std::string message;
};

// The process hosting `rank` ended without a word (it crashed or was killed) while this one waited.
struct PeerLost : std::exception {
  PeerLost(int rank, std::string process) : rank(rank), process(std::move(process)) {}
  const char* what() const noexcept override { return "a peer process ended"; }
  int rank;
  std::string process;  // "pid 1234 on host"
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Never blocks: the message waits at the destination until received.
  virtual void send(int src, int dst, const MessageKey& key, Message message) = 0;
  // Blocks until the message from `src` with this key arrives. Throws RecvTimeout after `deadline` and
  // RunAborted once abort() is called; between processes also PeerFailed and PeerLost.
  virtual Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) = 0;
  // Wakes every waiting receive (they throw RunAborted) and fails every later one.
  virtual void abort() = 0;
  // Between processes: tells the others that this one's run failed with `message`, so that their waits end
  // (PeerFailed) instead of running into the timeout. Ranks in one process share the failure directly.
  virtual void announce_failure(const std::string& message) {}
};

// Ranks as threads of one process: a mailbox per rank guarded by a mutex and a condition variable. A sent
// tensor is copied into the mailbox, so the sender may reuse or free its own at once.
class ThreadTransport : public Transport {
 public:
  explicit ThreadTransport(int ranks);
  // `spin`: receivers spin a while before they sleep; the default where every rank has a core.
  ThreadTransport(int ranks, bool spin);
  void send(int src, int dst, const MessageKey& key, Message message) override;
  Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) override;
  void abort() override;

  // Ranks taking turns on the cores (executor/core_turns.hpp). A receiver holding a turn keeps it, spinning,
  // while no other rank wants one (or until `stop`); one that must sleep gives its turn up and is queued for a
  // turn by its message's send, so that it wakes on the core it will compute on, holding `turn`.
  void take_turns(CoreTurns* turns) { turns_ = turns; }
  Message recv_taking_turns(int dst, int src, const MessageKey& key, Clock::time_point deadline, CoreTurn& turn,
                            const std::atomic<bool>& stop);

 private:
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<std::tuple<int, MessageKey>, Message> messages;  // (src, key)
    std::atomic<unsigned long> sent{0};  // messages put here so far: what a spinning receiver watches
    // recv_in_turn's rank asleep on (src, key), queued for a turn by that message's send.
    std::optional<std::tuple<int, MessageKey>> sleeper_for;
    CoreTurn* sleeper = nullptr;
  };
  std::vector<Mailbox> boxes_;
  // With the mailbox's lock held: the message from (src, key) taken out of it, or nothing.
  static std::optional<Message> take_message(Mailbox& box, const std::tuple<int, MessageKey>& id);
  // Whether the message is in `dst`'s mailbox.
  bool arrived(int dst, int src, const MessageKey& key);
  // recv_taking_turns after the turn is given up: the message, with a turn taken where the rank slept for it.
  Message recv_in_turn(int dst, int src, const MessageKey& key, Clock::time_point deadline, CoreTurn& turn);

  bool spin_;  // receivers spin before they sleep (executor/spin_wait.hpp)
  CoreTurns* turns_ = nullptr;
  std::mutex abort_mutex_;
  bool aborted_ = false;
};

}  // namespace pw
