#pragma once
// Rank threads that take turns on a machine's cores as the simulator's SharedCores has them: a rank computes
// only while it holds one of the cores' turns, a rank waiting for a tensor keeps its turn while no other rank
// wants one and gives it up then, and a freed turn goes to the rank that asked for one first, on that core.
//
// Why not leave it to the OS: with more runnable threads than cores, Linux queued a woken rank behind a busy
// core's rank and did not move a thread that ran there within half a millisecond (sched_migration_cost), so
// the other core sat idle for 0.1 to 1 ms while a rank waited in its queue: 9% of the cores' time in 8-rank
// runs on 2 cores (perf sched; docs/reliability.md). Here no rank is woken without a core: a turn is a CPU, a
// rank handed one is bound there before it wakes, and a rank asleep on a tensor is queued for a turn by the
// tensor's sender (ThreadTransport), so it too wakes on the core it will compute on.
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "executor/backend.hpp"

namespace pw {

class CoreTurns;

// One rank's place in the turns: whether it holds one (and which CPU), and where it sleeps until handed one.
// It lives as long as its rank's thread runs, so a turn is handed over after the lock is let go (a waiter
// woken under the lock would run only to wait for it) without outliving the condition it is signalled on.
// Used from its rank's thread only, besides the handing over. Without turns (null) every call does nothing.
class CoreTurn {
 public:
  explicit CoreTurn(CoreTurns* turns) : turns_(turns) {}
  ~CoreTurn() { give_up(); }
  CoreTurn(const CoreTurn&) = delete;
  CoreTurn& operator=(const CoreTurn&) = delete;

  // Takes a turn unless this rank holds one (CoreTurns::take).
  void hold(Clock::time_point deadline);
  bool held() const { return core_ >= 0; }
  // Gives the turn up where this rank holds one (CoreTurns::give_up).
  void give_up();

 private:
  friend class CoreTurns;
  CoreTurns* turns_;
  int core_ = -1;       // the turn held, by its CPU; -1: none
  // Written under CoreTurns' lock:
  std::condition_variable handed_;
  pthread_t thread_{};  // set when the rank first waits
  int pinned_ = -1;     // the CPU its thread is bound to, -1: none yet (binding costs a few microseconds)
  int granted_ = -1;    // a turn handed over while it slept or queued; -1: none
};

class CoreTurns {
 public:
  // One turn on each of the first `cores` CPUs this process may run on (0..cores-1 where it cannot tell);
  // `cores` >= 1.
  explicit CoreTurns(int cores);

  // Blocks until `rank` holds a turn, a free one or one handed over in the order of asking; its thread then
  // runs on that CPU. Throws RunAborted once abort() is called, and RecvTimeout (executor/transport.hpp) past
  // `deadline`.
  void take(CoreTurn& rank, Clock::time_point deadline);
  // On `rank`'s thread, before it sleeps on a tensor whose arrival will queue() it from another thread.
  void will_sleep(CoreTurn& rank);
  // From another rank's thread, for a rank asleep on a tensor that has now arrived: it gets a free turn at once,
  // or a place in the queue; await() returns once it holds one.
  void queue(CoreTurn& rank);
  // On `rank`'s thread, after queue() or before it: sleeps until the rank holds a turn. Throws as take() does.
  void await(CoreTurn& rank, Clock::time_point deadline);
  // `rank`'s turn goes to the first rank waiting, or back to the free ones. Its thread stays bound to that
  // CPU: it is woken next only when handed a turn, and bound then to that turn's.
  void give_up(CoreTurn& rank);
  // `rank` leaves without a turn (a failure, a timeout): out of the queue, and a turn handed to it meanwhile
  // passed on.
  void withdraw(CoreTurn& rank);
  // Wakes every waiting rank (they throw RunAborted) and fails every later take() or await().
  void abort();
  // Ranks waiting for a turn: a holder waiting for a tensor keeps its core (spinning) until one does.
  int waiting() const { return waiting_.load(std::memory_order_acquire); }
  // Ranks asleep until handed a turn (queued, or asleep on a tensor).
  int asleep();
  bool wanted() const { return waiting() > 0; }

 private:
  // With the lock held: waiting_ follows queue_ (it is read without the lock), and `rank` leaves the queue.
  void waiting_changed();
  void leave_queue(CoreTurn& rank);
  // With the lock held: `rank` gets a free turn, or a place in the queue. Returns whom to wake (or null).
  CoreTurn* grant_or_queue(CoreTurn& rank);
  // With the lock held: the turn on `core` to the first rank waiting (returned, to be woken after the lock is
  // let go), or back to the free ones (null).
  CoreTurn* hand_on(int core);
  // With the lock held: binds `rank`'s thread to `cpu` (core_turns.cpp says why).
  static void bind(CoreTurn& rank, int cpu);
  // With `lock` held: sleeps until `rank` was handed a turn; throws as take() does.
  void wait_handed(std::unique_lock<std::mutex>& lock, CoreTurn& rank, Clock::time_point deadline);

  std::mutex mutex_;
  std::deque<CoreTurn*> queue_;
  std::vector<CoreTurn*> asleep_;  // in wait_handed(), for abort()
  std::atomic<int> waiting_{0};    // queue_.size(), for wanted() without the lock
  std::vector<int> free_;          // the free turns' CPUs
  bool aborted_ = false;
};

}  // namespace pw
