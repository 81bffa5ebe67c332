#include "executor/transport.hpp"

#include <thread>

#include "core/error.hpp"
#include "executor/spin_wait.hpp"

namespace pw {

std::optional<Message> ThreadTransport::take_message(Mailbox& box, const std::tuple<int, MessageKey>& id) {
  auto it = box.messages.find(id);
  if (it == box.messages.end()) return std::nullopt;
  Message m = std::move(it->second);
  box.messages.erase(it);
  return m;
}

ThreadTransport::ThreadTransport(int ranks) : ThreadTransport(ranks, spin_allowed(ranks)) {}

ThreadTransport::ThreadTransport(int ranks, bool spin) : boxes_(static_cast<size_t>(ranks)), spin_(spin) {}

void ThreadTransport::send(int src, int dst, const MessageKey& key, Message message) {
  if (message.tensor) message.tensor = message.tensor->clone();
  Mailbox& box = boxes_[static_cast<size_t>(dst)];
  {
    std::lock_guard lock(box.mutex);
    const std::tuple<int, MessageKey> id{src, key};
    box.messages[id] = std::move(message);
    box.sent.fetch_add(1, std::memory_order_release);
    // Queued under the mailbox's lock: a sleeper that gives up waiting (a timeout, an abort) clears itself and
    // withdraws from the queue under that lock, so it is never queued after it has left.
    if (box.sleeper && box.sleeper_for == id) {
      turns_->queue(*box.sleeper);
      box.sleeper = nullptr;
      box.sleeper_for.reset();
    }
  }
  box.arrived.notify_all();
}

Message ThreadTransport::recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) {
  Mailbox& box = boxes_[static_cast<size_t>(dst)];
  std::unique_lock lock(box.mutex);
  const std::tuple<int, MessageKey> id{src, key};
  bool spun = !spin_;
  for (;;) {
    // aborted_ is only written under every mailbox's lock (abort() takes them all), so reading it under
    // this one is safe.
    if (aborted_) throw RunAborted();
    if (std::optional<Message> m = take_message(box, id)) return std::move(*m);
    if (!spun) {
      // Once per receive: spin while messages arrive (not necessarily this one), then sleep.
      const unsigned long seen = box.sent.load(std::memory_order_relaxed);
      lock.unlock();
      spun = !spin_until_changed(box.sent, seen);
      lock.lock();
      continue;
    }
    if (box.arrived.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (aborted_) throw RunAborted();
      if (box.messages.count(id) == 0) throw RecvTimeout();
    }
  }
}

bool ThreadTransport::arrived(int dst, int src, const MessageKey& key) {
  Mailbox& box = boxes_[static_cast<size_t>(dst)];
  std::lock_guard lock(box.mutex);
  return box.messages.count({src, key}) > 0;
}

Message ThreadTransport::recv_taking_turns(int dst, int src, const MessageKey& key, Clock::time_point deadline,
                                           CoreTurn& turn, const std::atomic<bool>& stop) {
  // While no other rank wants a core, this one would idle anyway, and the message's arrival then wakes no one
  // (a rank asleep on an idle vCPU takes tens of microseconds to wake).
  if (turn.held())
    while (!arrived(dst, src, key) && !turns_->wanted() && !stop && Clock::now() < deadline) std::this_thread::yield();
  if (!arrived(dst, src, key)) turn.give_up();
  return recv_in_turn(dst, src, key, deadline, turn);
}

Message ThreadTransport::recv_in_turn(int dst, int src, const MessageKey& key, Clock::time_point deadline,
                                      CoreTurn& turn) {
  Mailbox& box = boxes_[static_cast<size_t>(dst)];
  const std::tuple<int, MessageKey> id{src, key};
  turns_->will_sleep(turn);
  {
    std::lock_guard lock(box.mutex);
    if (aborted_) throw RunAborted();
    if (std::optional<Message> m = take_message(box, id)) return std::move(*m);
    box.sleeper = &turn;
    box.sleeper_for = id;
  }
  try {
    turns_->await(turn, deadline);
  } catch (...) {
    std::lock_guard lock(box.mutex);
    if (box.sleeper == &turn) {
      box.sleeper = nullptr;
      box.sleeper_for.reset();
    }
    turns_->withdraw(turn);
    throw;
  }
  std::lock_guard lock(box.mutex);
  std::optional<Message> m = take_message(box, id);
  if (!m) throw_runtime("a rank was handed a core for a message that is not in its mailbox");
  return std::move(*m);
}

void ThreadTransport::abort() {
  std::lock_guard guard(abort_mutex_);
  for (Mailbox& box : boxes_) box.mutex.lock();
  aborted_ = true;
  for (Mailbox& box : boxes_) box.mutex.unlock();
  for (Mailbox& box : boxes_) box.arrived.notify_all();
}

}  // namespace pw
