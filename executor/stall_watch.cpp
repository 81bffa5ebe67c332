#include "executor/stall_watch.hpp"

#include <algorithm>
#include <atomic>

namespace pw {
namespace {

std::atomic<int> left_running{0};

// A wait ends at its own deadline, the limit after it began; this much later it is stuck.
constexpr Clock::duration kWaitGrace = std::chrono::seconds(1);
// How long after the run stopped an overdue rank may take to return: woken waits and sleeps return in
// microseconds, a thread the OS has not scheduled yet in milliseconds.
constexpr Clock::duration kReturnGrace = std::chrono::milliseconds(250);

}  // namespace

int rank_threads_left_running() { return left_running.load(); }

StallWatch::StallWatch(int slots, double limit_s)
    : limit_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_s))) {
  for (int i = 0; i < slots; ++i) slots_.push_back(std::make_unique<Slot>());
}

void StallWatch::working(int slot, std::string where) {
  Slot& s = *slots_[static_cast<size_t>(slot)];
  std::lock_guard lock(s.mutex);
  s.where = std::move(where);
  s.since = Clock::now();
  s.waiting = false;
}

void StallWatch::waiting(int slot) {
  Slot& s = *slots_[static_cast<size_t>(slot)];
  std::lock_guard lock(s.mutex);
  s.since = Clock::now();
  s.waiting = true;
}

const std::string& StallWatch::where(int slot) const { return slots_[static_cast<size_t>(slot)]->where; }

void StallWatch::done(int slot) {
  Slot& s = *slots_[static_cast<size_t>(slot)];
  {
    std::lock_guard lock(s.mutex);
    s.done = true;
    if (s.given_up) --left_running;
  }
  // Under the lock wait() checks under: the notification cannot fall between its check and its sleep.
  std::lock_guard lock(mutex_);
  changed_.notify_all();
}

void StallWatch::stopped() {
  std::lock_guard lock(mutex_);
  if (!stopped_at_) stopped_at_ = Clock::now();
  changed_.notify_all();
}

StallWatch::Report StallWatch::wait() {
  std::unique_lock lock(mutex_);
  for (;;) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    Report overdue{Event::Overdue, {}}, given_up{Event::GivenUp, {}};
    bool running = false, someone_waits = false;
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = *slots_[i];
      std::lock_guard slot_lock(s.mutex);
      if (s.done || s.given_up) continue;
      running = true;
      const Clock::time_point overdue_at = s.since + limit_ + (s.waiting ? kWaitGrace : Clock::duration::zero());
      if (now < overdue_at) {
        someone_waits = someone_waits || s.waiting;
        next = std::min(next, overdue_at);
        continue;
      }
      const StalledRank rank{static_cast<int>(i), s.where, s.waiting};
      overdue.ranks.push_back(rank);
      if (!stopped_at_) continue;
      if (now < *stopped_at_ + kReturnGrace) {
        next = std::min(next, *stopped_at_ + kReturnGrace);
        continue;
      }
      s.given_up = true;
      ++left_running;
      given_up.ranks.push_back(rank);
    }
    if (!running) return {};
    if (!given_up.ranks.empty()) return given_up;
    if (!overdue.ranks.empty() && !stopped_at_ && !someone_waits) return overdue;
    changed_.wait_until(lock, next);
  }
}

}  // namespace pw
