#pragma once
// How a rank thread waits for another in the same process: a short spin before it sleeps. A sleeping
// thread costs its waker a futex call and itself a scheduler wake-up (tens to hundreds of microseconds
// on a VM, at every hand-over between stages), which a GPU pipeline does not pay; the spin catches the
// hand-overs that come soon. Only where every rank thread can have a core of its own: with more ranks
// than cores a spinning thread would take the core a rank it waits for needs (there, rank threads take turns
// on the cores instead, and spin only while no other rank wants one: executor/core_turns.hpp).
#include <atomic>
#include <chrono>
#include <thread>

namespace pw {

// How long a waiter spins before it sleeps.
constexpr std::chrono::microseconds kSpinBeforeSleep{1000};

// Whether `threads` rank threads may spin: no more of them than the hardware runs at once.
inline bool spin_allowed(int threads) {
  const unsigned cores = std::thread::hardware_concurrency();
  return threads >= 1 && cores > 0 && static_cast<unsigned>(threads) <= cores;
}

// Spins, yielding, until `counter` differs from `seen` or kSpinBeforeSleep has passed; true when it changed.
inline bool spin_until_changed(const std::atomic<unsigned long>& counter, unsigned long seen) {
  const auto until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
  while (counter.load(std::memory_order_acquire) == seen) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace pw
