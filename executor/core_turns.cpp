#include "executor/core_turns.hpp"

#include <sched.h>

#include <algorithm>

#include "core/error.hpp"
#include "executor/transport.hpp"

namespace pw {
namespace {

// The first `n` CPUs this process may run on, in order; 0..n-1 where it cannot tell.
std::vector<int> allowed_cpus(int n) {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE && static_cast<int>(cpus.size()) < n; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (static_cast<int>(cpus.size()) < n) {
    cpus.clear();
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

template <typename T>
void erase_one(T& container, typename T::value_type v) {
  if (auto it = std::find(container.begin(), container.end(), v); it != container.end()) container.erase(it);
}

}  // namespace

void CoreTurn::hold(Clock::time_point deadline) {
  if (turns_ && core_ < 0) turns_->take(*this, deadline);
}

void CoreTurn::give_up() {
  if (turns_ && core_ >= 0) turns_->give_up(*this);
}

CoreTurns::CoreTurns(int cores) {
  if (cores < 1) throw_runtime("core turns: {} cores; at least 1", cores);
  free_ = allowed_cpus(cores);
}

// Binds `rank`'s thread to `cpu` where it is not bound there already, before it wakes: it then runs there as
// soon as the rank that gave the turn up sleeps, not behind a rank computing on another core. Where the OS
// refuses (a CPU taken away meanwhile), the thread runs where it may.
void CoreTurns::bind(CoreTurn& rank, int cpu) {
  if (rank.pinned_ == cpu) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(rank.thread_, sizeof set, &set);
  rank.pinned_ = cpu;
}

void CoreTurns::waiting_changed() { waiting_.store(static_cast<int>(queue_.size()), std::memory_order_release); }

void CoreTurns::leave_queue(CoreTurn& rank) {
  erase_one(queue_, &rank);
  waiting_changed();
}

CoreTurn* CoreTurns::grant_or_queue(CoreTurn& rank) {
  if (!free_.empty() && queue_.empty()) {
    rank.granted_ = free_.back();
    free_.pop_back();
    bind(rank, rank.granted_);
    return &rank;
  }
  queue_.push_back(&rank);
  waiting_changed();
  return nullptr;
}

CoreTurn* CoreTurns::hand_on(int core) {
  if (queue_.empty()) {
    free_.push_back(core);
    return nullptr;
  }
  CoreTurn* next = queue_.front();
  queue_.pop_front();
  waiting_changed();
  next->granted_ = core;
  bind(*next, core);
  return next;
}

void CoreTurns::wait_handed(std::unique_lock<std::mutex>& lock, CoreTurn& rank, Clock::time_point deadline) {
  asleep_.push_back(&rank);
  const bool handed = rank.handed_.wait_until(lock, deadline, [&] { return rank.granted_ >= 0 || aborted_; });
  erase_one(asleep_, &rank);
  if (rank.granted_ >= 0) {
    rank.core_ = rank.granted_;
    rank.granted_ = -1;
    return;
  }
  leave_queue(rank);
  if (!handed) throw RecvTimeout();
  throw RunAborted();
}

void CoreTurns::take(CoreTurn& rank, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (aborted_) throw RunAborted();
  rank.thread_ = pthread_self();
  grant_or_queue(rank);
  wait_handed(lock, rank, deadline);
}

void CoreTurns::will_sleep(CoreTurn& rank) {
  std::lock_guard lock(mutex_);
  rank.thread_ = pthread_self();
}

void CoreTurns::queue(CoreTurn& rank) {
  CoreTurn* wake = nullptr;
  {
    std::lock_guard lock(mutex_);
    wake = grant_or_queue(rank);
  }
  // Signalled after the lock is let go (a waiter woken under it would only wait for it); the rank's CoreTurn
  // outlives its waits, so a late signal is a spurious wake-up at worst.
  if (wake) wake->handed_.notify_one();
}

void CoreTurns::await(CoreTurn& rank, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (aborted_) throw RunAborted();
  wait_handed(lock, rank, deadline);
}

void CoreTurns::give_up(CoreTurn& rank) {
  CoreTurn* wake = nullptr;
  {
    std::lock_guard lock(mutex_);
    wake = hand_on(rank.core_);
    rank.core_ = -1;
  }
  if (wake) wake->handed_.notify_one();
}

void CoreTurns::withdraw(CoreTurn& rank) {
  CoreTurn* wake = nullptr;
  {
    std::lock_guard lock(mutex_);
    leave_queue(rank);
    if (rank.granted_ >= 0) wake = hand_on(rank.granted_);
    rank.granted_ = -1;
  }
  if (wake) wake->handed_.notify_one();
}

int CoreTurns::asleep() {
  std::lock_guard lock(mutex_);
  return static_cast<int>(asleep_.size());
}

void CoreTurns::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  for (CoreTurn* rank : asleep_) rank->handed_.notify_one();
}

}  // namespace pw
