#pragma once
// Watches rank threads for a stall. A rank is overdue when it has stayed inside one action (a kernel, the
// test hook, the optimizer step) for longer than the limit, or inside one of its own bounded waits for a
// second longer than that. An overdue rank that others wait for is left to their waits, which end the run
// naming what they waited for; with nobody waiting, the watch itself has the run stopped. Once the run has
// stopped, a rank that is overdue and still has not returned a quarter second later is stalled: a thread
// cannot be stopped from outside, so the thread that started the ranks gives it up instead of joining it
// (executor/runtime.hpp, RankStalled).
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "executor/backend.hpp"

namespace pw {

struct StalledRank {
  int slot = 0;
  std::string where;     // what it was doing: "0F0", "the optimizer step", ...
  bool waiting = false;  // stuck in a wait that should have ended on its own
};

class StallWatch {
 public:
  StallWatch(int slots, double limit_s);

  // On the rank's own thread: it now does `where`, which may never end.
  void working(int slot, std::string where);
  // On the rank's own thread: it now waits (at what it last did), a wait with its own deadline.
  void waiting(int slot);
  // On the rank's own thread: what it last said it does.
  const std::string& where(int slot) const;
  // On the rank's own thread, as it ends.
  void done(int slot);
  // The run has stopped (a failure); every rank should now return promptly.
  void stopped();

  enum class Event {
    AllDone,  // every rank not given up has returned
    Overdue,  // `ranks` are overdue, nobody waits for them and the run has not stopped: stop it
    GivenUp,  // `ranks` stalled after the run stopped: given up from now on (their done() no longer counts)
  };
  struct Report {
    Event event = Event::AllDone;
    std::vector<StalledRank> ranks;
  };
  // On the thread that started the ranks: returns at the first event.
  Report wait();

 private:
  struct Slot {
    mutable std::mutex mutex;
    std::string where = "the start";
    Clock::time_point since = Clock::now();
    bool waiting = false;
    bool done = false;
    bool given_up = false;
  };
  std::vector<std::unique_ptr<Slot>> slots_;
  Clock::duration limit_;
  std::mutex mutex_;  // guards stopped_at_; what wait() sleeps on
  std::condition_variable changed_;
  std::optional<Clock::time_point> stopped_at_;
};

// How many rank threads of this process were given up as stalled and are still running. While any is,
// the process must end without running destructors they may still use (the CLI leaves by std::_Exit).
int rank_threads_left_running();

}  // namespace pw
