#include "executor/transport.hpp"

#include "executor/spin_wait.hpp"

namespace pw {

ThreadTransport::ThreadTransport(int ranks) : ThreadTransport(ranks, spin_allowed(ranks)) {}

ThreadTransport::ThreadTransport(int ranks, bool spin) : boxes_(static_cast<size_t>(ranks)), spin_(spin) {}

void ThreadTransport::send(int src, int dst, const MessageKey& key, Message message) {
  if (message.tensor) message.tensor = message.tensor->clone();
  Mailbox& box = boxes_[static_cast<size_t>(dst)];
  {
    std::lock_guard lock(box.mutex);
    box.messages[{src, key}] = std::move(message);
    box.sent.fetch_add(1, std::memory_order_release);
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
    auto it = box.messages.find(id);
    if (it != box.messages.end()) {
      Message m = std::move(it->second);
      box.messages.erase(it);
      return m;
    }
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
      it = box.messages.find(id);
      if (it == box.messages.end()) throw RecvTimeout();
    }
  }
}

void ThreadTransport::abort() {
  std::lock_guard guard(abort_mutex_);
  for (Mailbox& box : boxes_) box.mutex.lock();
  aborted_ = true;
  for (Mailbox& box : boxes_) box.mutex.unlock();
  for (Mailbox& box : boxes_) box.arrived.notify_all();
}

}  // namespace pw
